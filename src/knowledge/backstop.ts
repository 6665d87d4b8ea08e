import { FileSystem, Path } from "@effect/platform"
import { Effect, Schema } from "effect"
import { Paths, layout } from "../config/Paths.js"
import { inCanonical, KnowledgeError } from "./canonical.js"
import type { KnowledgeResult } from "../contract/knowledge.js"
import { type Checkout, Checkouts, hostSide, quarantineRef } from "./Checkout.js"
import { fetchFromClone } from "./fromClone.js"
import { git, gitLine, gitSays } from "./HostGit.js"
import { nestedRepos } from "./nestedRepos.js"

/**
 * The run's uncommitted changes, as a commit on top of its HEAD (or HEAD itself when there are
 * none). git reads the clone's files as plain data through the host's own git dir and index:
 * the clone's config, hooks and fsmonitor are never consulted. A folder that is a repository of
 * its own is left out (git cannot take its files) and named in `left`.
 */
const withWorktree = (c: Checkout, runId: string, head: string) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const onTree = { gitDir: c.scratch, workTree: c.clone, indexFile: path.join(c.scratch, "roster-index"), trust: [c.clone] }
    const left = yield* nestedRepos(c.clone)
    yield* git({ ...onTree, args: ["read-tree", head] })
    yield* git({ ...onTree, args: ["add", "--all", "--", ".", ...left.map((dir) => `:(exclude,literal)${dir}`)] })
    const tree = (yield* git({ ...onTree, args: ["write-tree"] })).trim()
    const headTree = yield* gitLine({ gitDir: c.scratch, args: ["rev-parse", `${head}^{tree}`] })
    if (tree === headTree) return { head, left }
    const commit = yield* gitLine({ gitDir: c.scratch, args: ["commit-tree", tree, "-p", head, "-m", `roster: uncommitted work of run ${runId}`] })
    return { head: commit, left }
  })

/** Parks `head` on the run's quarantine ref in the canonical repo (unless the default branch has it already). */
const park = (c: Checkout, runId: string, head: string) =>
  Effect.gen(function*() {
    if (head === c.base) return { unchanged: true } as const
    const canonical = { path: c.canonical, gitDir: c.canonical_git_dir }
    const landed = yield* gitLine({ ...inCanonical(canonical), args: ["rev-parse", "--verify", `refs/heads/${c.default_branch}`] })
    if (yield* gitSays({ gitDir: c.scratch, args: ["merge-base", "--is-ancestor", head, landed] })) {
      return { landed_ref: `refs/heads/${c.default_branch}` } as const
    }
    // The canonical repo pulls from the host's git dir (roster's own), so nothing of the box's runs there.
    yield* git({ gitDir: c.scratch, args: ["update-ref", "refs/roster/park", head] })
    const ref = quarantineRef(runId)
    yield* git({ ...inCanonical(canonical), args: ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", c.scratch, `+refs/roster/park:${ref}`] })
    return { quarantined_ref: ref } as const
  })

/**
 * However the run ended: what it did not land is parked on refs/quarantine/run-<id> in the
 * canonical repo — its commits and its uncommitted changes. Never a merge. A step that fails
 * parks what it still can (the commits without the uncommitted changes) and marks the clone
 * `kept`: its result's `error` says what is not parked, and the clone stays for a person.
 */
export const backstop = (c: Checkout, runId: string) =>
  Effect.gen(function*() {
    const committed = yield* fetchFromClone(c, "HEAD", "refs/box/head")
    const snapshot = c.mode === "rw"
      ? yield* withWorktree(c, runId, committed).pipe(Effect.either)
      : { _tag: "Right" as const, right: { head: committed, left: [] as ReadonlyArray<string> } }
    const head = snapshot._tag === "Right" ? snapshot.right.head : committed
    const parked = yield* park(c, runId, head)
    const missing = snapshot._tag === "Left"
      ? `its uncommitted changes could not be read (${snapshot.left.message})`
      : snapshot.right.left.length > 0
      ? `${snapshot.right.left.map((d) => `${d}/`).join(", ")} ${snapshot.right.left.length === 1 ? "is a git repository" : "are git repositories"} of its own, not parked`
      : undefined
    return {
      connection: c.connection, base: c.base, head, ...parked,
      ...(missing ? { error: `${missing}: the clone is kept at ${c.clone}`, kept: c.clone } : {})
    } satisfies KnowledgeResult
  }).pipe(
    Effect.catchAll((e) =>
      Effect.succeed<KnowledgeResult>({
        connection: c.connection, base: c.base, head: null, error: `${e.message}: nothing parked, the clone is kept at ${c.clone}`, kept: c.clone
      })
    )
  )

/**
 * The checkouts a run was given, from the host's record of them (none when the run had no gated repo). A
 * record that is there and cannot be read or decoded is an error, never "no checkouts": read as none, the
 * run's end would delete clones whose work was never parked.
 */
export const readCheckouts = (worker: string, runId: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const file = hostSide(layout(yield* Paths).runReposDir(worker, runId)).checkouts
    const unreadable = (detail: string) => new KnowledgeError({ connection: "(every one of this run's)", detail: `${file} could not be read: ${detail}` })
    const there = yield* fs.exists(file).pipe(Effect.mapError((e) => unreadable(e.message)))
    if (!there) return [] as ReadonlyArray<Checkout>
    const text = yield* fs.readFileString(file).pipe(Effect.mapError((e) => unreadable(e.message)))
    return yield* Schema.decode(Checkouts)(text).pipe(Effect.mapError((e) => unreadable(e.message.split("\n")[0] ?? "it does not decode")))
  })

/**
 * The end of a run's gated repos, once its box is gone: each backstopped, then the run's clones
 * and the host's git dirs removed — unless a backstop could not park everything, when the whole
 * folder is kept (and the log says where). Safe to call again (a second call finds nothing).
 */
export const finishRepos = Effect.fn("knowledge.finish")(function*(worker: string, runId: string) {
  const fs = yield* FileSystem.FileSystem
  const dir = layout(yield* Paths).runReposDir(worker, runId)
  const checkouts = yield* readCheckouts(worker, runId).pipe(Effect.either)
  if (checkouts._tag === "Left") {
    // Which clones there are, and where each one's work belongs, is in the record that cannot be read: keep them all.
    const error = `${checkouts.left.detail}: nothing could be parked, and the run's clones are kept in ${dir} for a person`
    yield* Effect.logWarning(`run ${runId}: ${error} — review them, then: rm -rf ${dir}`)
    return [{ connection: "(unknown: the run's record of its checkouts)", base: "", head: null, error, kept: dir }] satisfies Array<KnowledgeResult>
  }
  const results: Array<KnowledgeResult> = []
  for (const c of checkouts.right) results.push(yield* backstop(c, runId))
  // A folder that cannot be looked at is not removed: its clones stay, which loses nothing.
  if (!(yield* fs.exists(dir).pipe(Effect.orElseSucceed(() => false)))) return results
  if (results.some((r) => r.kept !== undefined)) {
    yield* Effect.logWarning(`run ${runId}: not all of its repo work could be parked; its clones are kept in ${dir} — remove it once reviewed: rm -rf ${dir}`)
    return results
  }
  yield* fs.remove(dir, { recursive: true }).pipe(
    Effect.catchAll((e) => Effect.logWarning(`run ${runId}: its repo clones could not be removed (${e.message}): rm -rf ${dir}`))
  )
  return results
})
