import { FileSystem, Path } from "@effect/platform"
import { Effect } from "effect"
import { Paths, layout } from "../config/Paths.js"
import { writeJson } from "../fs/atomic.js"
import { lchownTree } from "../fs/tree.js"
import { KnowledgeError } from "./canonical.js"
import { branchFor, type Checkout, hostSide } from "./Checkout.js"
import { readCheckouts } from "./backstop.js"
import { git } from "./HostGit.js"

/**
 * A warm box's gated repos given to the run that takes it (host-side, before its first prompt): the
 * run's repos folder is the box's renamed, each clone's branch is named for the run, and the host's
 * record says where they are now — the push and the backstop find them under the run's id. The box's
 * own mounts follow the rename (a bind mount holds the folder, not its path).
 */
export const moveCheckouts = Effect.fn("knowledge.move")(function*(
  worker: string,
  from: string,
  to: string,
  user: { readonly uid: number; readonly gid: number }
) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const files = layout(yield* Paths)
  const fromDir = files.runReposDir(worker, from)
  const toDir = files.runReposDir(worker, to)
  const before = yield* readCheckouts(worker, from)
  const failAll = (e: { readonly message: string }) =>
    new KnowledgeError({ connection: before.map((c) => c.connection).join(", ") || "(none)", detail: e.message })
  yield* fs.rename(fromDir, toDir).pipe(Effect.mapError(failAll))
  const moved = (p: string) => (p === fromDir || p.startsWith(fromDir + path.sep) ? toDir + p.slice(fromDir.length) : p)
  const branch = branchFor(worker, to)
  const after: Array<Checkout> = []
  for (const c of before) {
    const clone = moved(c.clone)
    const fail = (e: { readonly message: string }) => new KnowledgeError({ connection: c.connection, detail: e.message })
    yield* git({ cwd: clone, trust: [clone], args: ["branch", "--quiet", "-m", c.branch, branch] }).pipe(Effect.mapError(fail))
    // git wrote the branch's ref, its log and HEAD as this process's user: the box's own again.
    if (user.uid !== process.getuid?.()) yield* lchownTree(path.join(clone, ".git"), user.uid, user.gid).pipe(Effect.mapError(fail))
    after.push({ ...c, clone, scratch: moved(c.scratch), branch })
  }
  yield* writeJson(hostSide(toDir).checkouts, after).pipe(Effect.mapError(failAll))
  return after as ReadonlyArray<Checkout>
})
