import { Clock, Effect, Option } from "effect"
import { Paths, layout } from "../config/Paths.js"
import { runDirs } from "../run/query.js"
import { readRunDir } from "../run/RunLog.js"

/**
 * The workers whose last run ended within `withinMin` minutes, the most recent first, at most `max`:
 * who gets a warm box when the daemon starts. Run ids begin with their start time, so each worker's
 * newest folder is its last run; only that record is read.
 */
export const recentWorkers = Effect.fn("warm.recentWorkers")(function*(withinMin: number, max: number) {
  const files = layout(yield* Paths)
  const now = yield* Clock.currentTimeMillis
  const newest = new Map<string, string>()
  for (const ref of yield* runDirs(Option.none())) if (!newest.has(ref.worker)) newest.set(ref.worker, ref.run_id)
  const ended: Array<{ readonly worker: string; readonly at: number }> = []
  for (const [worker, runId] of newest) {
    const record = yield* readRunDir(files.runDir(worker, runId))
    const at = record?.finished_at ? Date.parse(record.finished_at) : Number.NaN
    if (Number.isFinite(at) && now - at <= withinMin * 60_000) ended.push({ worker, at })
  }
  return ended.sort((a, b) => b.at - a.at).slice(0, max).map((e) => e.worker)
})
