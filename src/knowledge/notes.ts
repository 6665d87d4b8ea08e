import { FileSystem } from "@effect/platform"
import { Effect } from "effect"
import { Paths, layout } from "../config/Paths.js"
import type { MountRule } from "../config/schema.js"
import { inCanonical, readCanonical } from "./canonical.js"
import { gatedRepos } from "./provision.js"
import { git } from "./HostGit.js"

/** What a run's briefing says about one gated repo, read before its clone exists. */
export interface RepoNote {
  readonly name: string
  readonly rw: boolean
  readonly defaultBranch: string | null
  readonly protect: ReadonlyArray<string>
  /** This worker's quarantined work not landed on the default branch yet, newest first. */
  readonly unlanded: ReadonlyArray<string>
}

const MAX_LISTED = 10

/** The worker's quarantine refs in a canonical repo that its default branch does not contain. */
const unlandedOf = (worker: string, mount: MountRule) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const files = layout(yield* Paths)
    const canonical = yield* readCanonical(mount)
    const out = yield* git({
      ...inCanonical(canonical),
      args: ["for-each-ref", "--sort=-refname", "--format=%(refname)", `--no-merged=refs/heads/${canonical.defaultBranch}`, "refs/quarantine/"]
    })
    const mine: Array<string> = []
    for (const ref of out.split("\n").filter((r) => r.startsWith("refs/quarantine/run-"))) {
      // Run ids are unique across workers; a ref is this worker's when its run record is.
      // A run folder that cannot be looked at leaves its ref out of this briefing only: the work stays in quarantine.
      if (yield* fs.exists(files.runDir(worker, ref.slice("refs/quarantine/run-".length))).pipe(Effect.orElseSucceed(() => false))) mine.push(ref)
      if (mine.length >= MAX_LISTED) break
    }
    return { defaultBranch: canonical.defaultBranch, unlanded: mine }
  })

/** Notes on each gated repo granted to the worker; a repo that cannot be read says nothing here (provisioning reports it). */
export const repoNotes = Effect.fn("knowledge.notes")(function*(worker: string, mounts: ReadonlyArray<MountRule>) {
  const notes: Array<RepoNote> = []
  for (const m of gatedRepos(mounts)) {
    // A repo that cannot be read says nothing in the briefing: provisioning the run reports it, and its work stays where it is.
    const found = yield* unlandedOf(worker, m).pipe(Effect.orElseSucceed(() => ({ defaultBranch: null, unlanded: [] as Array<string> })))
    notes.push({ name: m.name, rw: m.rw, protect: m.protect, ...found })
  }
  return notes as ReadonlyArray<RepoNote>
})
