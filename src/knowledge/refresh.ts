import { Effect } from "effect"
import { writeJson } from "../fs/atomic.js"
import { Paths, layout } from "../config/Paths.js"
import { lchownTree } from "../fs/tree.js"
import { readCheckouts } from "./backstop.js"
import { inCanonical, KnowledgeError } from "./canonical.js"
import { type Checkout, hostSide } from "./Checkout.js"
import { git, gitLine } from "./HostGit.js"

/**
 * One clone made before its run (a warm box's) brought to where its canonical repo's default
 * branch is now: the new commits fetched, the run's branch moved to them. Nothing has run in the
 * box yet (pi waits for its first prompt), so the clone is still as roster left it; its own git
 * config is read, with the hardening every host git call carries.
 */
const refreshOne = (c: Checkout, user: { readonly uid: number; readonly gid: number }) =>
  Effect.gen(function*() {
    const fail = (e: { readonly message: string }) => new KnowledgeError({ connection: c.connection, detail: e.message })
    const canonical = { path: c.canonical, gitDir: c.canonical_git_dir }
    const head = yield* gitLine({ ...inCanonical(canonical), args: ["rev-parse", "--verify", `refs/heads/${c.default_branch}^{commit}`] }).pipe(Effect.mapError(fail))
    if (head === c.base) return c
    const inClone = { cwd: c.clone, trust: [c.clone, c.canonical, c.canonical_git_dir] }
    yield* git({ ...inClone, args: ["fetch", "--quiet", "--no-tags", "--", c.canonical, `refs/heads/${c.default_branch}`] }).pipe(Effect.mapError(fail))
    yield* git({ ...inClone, args: ["reset", "--quiet", "--hard", head] }).pipe(Effect.mapError(fail))
    if (user.uid !== process.getuid?.()) yield* lchownTree(c.clone, user.uid, user.gid).pipe(Effect.mapError(fail))
    return { ...c, base: head }
  })

/**
 * A warm box's gated repos at its claim: each clone at its canonical head (the one it was made at,
 * or the newer one it is moved to), and the host's record of them saying so — the push and the
 * backstop measure the run's work from that base. The run's branch is already the run's: the box was
 * handed over under the run's id (moveCheckouts).
 */
export const refreshCheckouts = Effect.fn("knowledge.refresh")(function*(
  worker: string,
  runId: string,
  user: { readonly uid: number; readonly gid: number }
) {
  const before = yield* readCheckouts(worker, runId)
  if (before.length === 0) return before
  const after: Array<Checkout> = []
  for (const c of before) after.push(yield* refreshOne(c, user))
  if (after.some((c, i) => c !== before[i])) {
    const file = hostSide(layout(yield* Paths).runReposDir(worker, runId)).checkouts
    yield* writeJson(file, after).pipe(Effect.mapError((e) => new KnowledgeError({ connection: after.map((c) => c.connection).join(", "), detail: e.message })))
  }
  return after as ReadonlyArray<Checkout>
})
