import { Effect, Schema } from "effect"
import type { MountRule } from "../config/schema.js"
import { gitLine } from "./HostGit.js"

/** A gated repo that cannot serve a run (not a repository, no commit, a detached HEAD), with the fix. */
export class KnowledgeError extends Schema.TaggedError<KnowledgeError>()("KnowledgeError", {
  connection: Schema.String,
  detail: Schema.String
}) {
  override get message() {
    return `gated repo "${this.connection}": ${this.detail}`
  }
}

export interface Canonical {
  readonly path: string
  readonly gitDir: string
  readonly bare: boolean
  readonly defaultBranch: string
  readonly head: string
}

/**
 * The canonical repository of a gated mount: where its git dir is, its default branch (what its
 * HEAD names) and that branch's commit. Each way it cannot serve is an error with the fix.
 */
export const readCanonical = Effect.fn("knowledge.canonical")(function*(mount: MountRule) {
  const fail = (detail: string) => new KnowledgeError({ connection: mount.name, detail })
  const at = { cwd: mount.path, trust: [mount.path] }
  const gitDir = yield* gitLine({ ...at, args: ["rev-parse", "--absolute-git-dir"] }).pipe(
    Effect.mapError(() => fail(`${mount.path} is not a git repository: run "git init" there and commit once, or make the mount kind = "dir"`))
  )
  const bare = (yield* gitLine({ ...at, trust: [mount.path, gitDir], args: ["rev-parse", "--is-bare-repository"] }).pipe(Effect.mapError((e) => fail(e.message)))) === "true"
  const defaultBranch = yield* gitLine({ ...at, trust: [mount.path, gitDir], args: ["symbolic-ref", "--short", "HEAD"] }).pipe(
    Effect.mapError(() => fail(`the HEAD of ${mount.path} is detached: check out its default branch there (git switch main)`))
  )
  const head = yield* gitLine({ ...at, trust: [mount.path, gitDir], args: ["rev-parse", "--verify", "--quiet", `refs/heads/${defaultBranch}^{commit}`] }).pipe(
    Effect.mapError(() => fail(`${mount.path} has no commit on ${defaultBranch} yet: commit once there`))
  )
  return { path: mount.path, gitDir, bare, defaultBranch, head } satisfies Canonical
})

/** Git calls in the canonical repository (the user's own: trusted, but still without hooks). */
export const inCanonical = (c: Pick<Canonical, "path" | "gitDir">) => ({ cwd: c.path, trust: [c.path, c.gitDir] })
