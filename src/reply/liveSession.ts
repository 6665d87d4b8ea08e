import { FileSystem, Path } from "@effect/platform"
import { Effect } from "effect"
import { isRunId } from "../config/names.js"
import { Paths, layout } from "../config/Paths.js"
import { ownerAlive } from "../contract/owner.js"
import { RunLog } from "../run/RunLog.js"
import { namesIn } from "../fs/namesIn.js"

/** A run's record by id alone: its worker found by its folder (one stat per worker; a fleet's run folders are shared). */
const runById = (runId: string) =>
  Effect.gen(function*() {
    if (!isRunId(runId)) return undefined
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const root = layout(yield* Paths).runsDir
    for (const worker of yield* namesIn(fs, root, "the runs")) {
      // A folder that cannot be looked at is not taken for this run's: a run not found is, to the caller, not live.
      if (yield* fs.exists(path.join(root, worker, runId)).pipe(Effect.orElseSucceed(() => false))) return yield* (yield* RunLog).read(worker, runId)
    }
    return undefined
  })

/**
 * A talk session a reply may go to: a session run (not a one-shot or a task) that has not ended
 * and whose owner is alive; why not, otherwise. A session on another node of a fleet is that
 * machine's process: its record says whether it ended.
 */
export const liveSession = Effect.fn("reply.liveSession")(function*(runId: string) {
  const run = yield* runById(runId)
  if (!run) return { live: false, why: `there is no run ${runId}` } as const
  if (run.kind !== "session") return { live: false, why: `run ${runId} is a ${run.kind === "box" ? "one-shot run" : "task's run"}, not a talk session` } as const
  const elsewhere = run.node !== undefined && run.node !== (yield* Paths).fleet?.node
  const live = run.finished_at === null && run.owner !== undefined && (elsewhere || (yield* ownerAlive(run.owner)))
  return live ? { live: true, worker: run.worker } as const : { live: false, why: `the session ${runId} has ended` } as const
})
