import { FileSystem, Path } from "@effect/platform"
import { Effect } from "effect"
import { Paths, layout } from "../config/Paths.js"
import { type MountRule, parseSize } from "../config/schema.js"
import { writeJson } from "../fs/atomic.js"
import { lchownTree } from "../fs/tree.js"
import { readCanonical, KnowledgeError } from "./canonical.js"
import { branchFor, type Checkout, hostSide, originDir } from "./Checkout.js"
import { git } from "./HostGit.js"

export const gatedRepos = (mounts: ReadonlyArray<MountRule>) => mounts.filter((m) => m.kind === "repo" && m.gated)

/**
 * One gated repo's per-run clone. A full local clone, not a `git worktree`: a worktree shares the
 * canonical repo's git dir (its objects, refs and config), so the box would write the canonical
 * repo itself. `--no-hardlinks`, because the clone is handed to the box user and a hard-linked
 * object file is the canonical repo's own inode. `--template=` keeps git's sample hooks out.
 */
const cloneOne = (mount: MountRule, worker: string, runId: string, reposDir: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const canonical = yield* readCanonical(mount)
    const fail = (e: { readonly message: string }) => new KnowledgeError({ connection: mount.name, detail: e.message })
    const clone = path.join(reposDir, mount.name)
    const scratch = hostSide(reposDir).scratch(mount.name)
    const branch = branchFor(worker, runId)
    yield* git({
      trust: [canonical.path, canonical.gitDir],
      args: ["clone", "--quiet", "--no-hardlinks", "--template=", "--branch", canonical.defaultBranch, "--", canonical.path, clone]
    }).pipe(Effect.mapError(fail))
    const inClone = { cwd: clone, trust: [clone] }
    yield* git({ ...inClone, args: ["checkout", "--quiet", "-b", branch] }).pipe(Effect.mapError(fail))
    // The box fetches from the canonical repo where it is mounted; the worker commits as itself.
    for (const [key, value] of [["remote.origin.url", originDir(mount.name)], ["user.name", worker], ["user.email", `${worker}@roster.test`]]) {
      yield* git({ ...inClone, args: ["config", key!, value!] }).pipe(Effect.mapError(fail))
    }
    // The host's own git dir for what it later reads from the clone: roster's config only, and
    // the canonical objects as an alternate so a fetch from the clone copies only what is new.
    yield* git({ args: ["init", "--quiet", "--bare", "--template=", scratch] }).pipe(Effect.mapError(fail))
    yield* fs.makeDirectory(path.join(scratch, "objects", "info"), { recursive: true }).pipe(Effect.mapError(fail))
    yield* fs.writeFileString(path.join(scratch, "objects", "info", "alternates"), `${path.join(canonical.gitDir, "objects")}\n`).pipe(Effect.mapError(fail))
    return {
      connection: mount.name,
      canonical: canonical.path,
      canonical_git_dir: canonical.gitDir,
      clone,
      scratch,
      default_branch: canonical.defaultBranch,
      base: canonical.head,
      branch,
      mode: mount.rw ? "rw" : "ro",
      protect: mount.protect,
      push_max: parseSize(mount.push_max)
    } satisfies Checkout
  })

/**
 * The run's gated repos: a clone of each on the run's own branch, owned by the box user, and the
 * host's record of them (beside, never mounted) for the push and the backstop.
 */
export const provisionRepos = Effect.fn("knowledge.provision")(function*(
  worker: string,
  runId: string,
  mounts: ReadonlyArray<MountRule>,
  user: { readonly uid: number; readonly gid: number }
) {
  const gated = gatedRepos(mounts)
  if (gated.length === 0) return [] as ReadonlyArray<Checkout>
  const fs = yield* FileSystem.FileSystem
  const reposDir = layout(yield* Paths).runReposDir(worker, runId)
  const host = hostSide(reposDir)
  const failAll = (e: { readonly message: string }) => new KnowledgeError({ connection: gated.map((m) => m.name).join(", "), detail: e.message })
  yield* fs.makeDirectory(host.dir, { recursive: true }).pipe(Effect.mapError(failAll))
  const checkouts: Array<Checkout> = []
  for (const mount of gated) {
    const c = yield* cloneOne(mount, worker, runId, reposDir)
    if (user.uid !== process.getuid?.()) yield* lchownTree(c.clone, user.uid, user.gid).pipe(Effect.mapError(failAll))
    checkouts.push(c)
    // Written after each clone, so a run cut short here still has its clones found and removed.
    yield* writeJson(host.checkouts, checkouts).pipe(Effect.mapError(failAll))
  }
  return checkouts as ReadonlyArray<Checkout>
})
