import { Path } from "@effect/platform"
import { Effect, Schema } from "effect"
import { Files } from "../fs/Files.js"

export class UnsafeClone extends Schema.TaggedError<UnsafeClone>()("UnsafeClone", { detail: Schema.String }) {
  override get message() {
    return `the box's clone is not read by the host: ${this.detail}`
  }
}

/** Files in a git dir that make git read another repository's refs or objects. */
const REDIRECTS = new Set(["commondir", "objects/info/alternates", "objects/info/http-alternates", "gitdir"])

/**
 * Before the host reads a repository the box wrote, its git dir must be a plain folder of plain
 * files: a symlink, a `commondir` or an alternates file would have the host's git read another
 * repository on the host (and copy what it finds into the canonical repo, where the box can read
 * it next run); a fifo would hang it.
 */
export const checkClone = Effect.fn("knowledge.checkClone")(function*(clone: string) {
  const files = yield* Files
  const path = yield* Path.Path
  const top = yield* files.list(clone).pipe(Effect.mapError((e) => new UnsafeClone({ detail: `the clone cannot be read (${e.message})` })))
  const dotGit = top.find((e) => e.name === ".git")
  if (dotGit?.kind !== "directory") {
    return yield* new UnsafeClone({ detail: dotGit ? `.git is a ${dotGit.kind}, not a folder` : "its .git is gone" })
  }
  const walk = (rel: string): Effect.Effect<void, UnsafeClone> =>
    Effect.gen(function*() {
      const entries = yield* files.list(path.join(clone, ".git", rel)).pipe(
        Effect.mapError((e) => new UnsafeClone({ detail: `.git/${rel} cannot be read (${e.message})` }))
      )
      for (const e of entries) {
        const r = rel === "" ? e.name : `${rel}/${e.name}`
        if (e.kind === "symlink" || e.kind === "other") return yield* new UnsafeClone({ detail: `.git/${r} is a ${e.kind === "symlink" ? "symlink" : "special file"}` })
        if (REDIRECTS.has(r)) return yield* new UnsafeClone({ detail: `.git/${r} points git at another repository` })
        if (e.kind === "directory") yield* walk(r)
      }
    })
  yield* walk("")
})
