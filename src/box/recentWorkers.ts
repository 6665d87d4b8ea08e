import { Clock, Effect, Option } from "effect"
import { Paths, layout } from "../config/Paths.js"
import { runDirs } from "../run/query.js"
import { readRunDir, type RunRecord } from "../run/RunLog.js"

/**
 * The workers whose last run ended within `withinMin` minutes, the most recent first, at most `max`:
 * who gets a warm box when the daemon starts. Run ids begin with their start time (a warm box's run
 * takes an id of its own when it takes the box), so each worker's newest folder with a record is its
 * last run: a newer one without (a warm box a killed daemon left, not taken) is passed over, and no
 * older record is read. On a fleet only a worker whose last run was this node's: a warm box is its
 * node's, and every node warming every worker of the shared folder would multiply the memory it holds.
 */
export const recentWorkers = Effect.fn("warm.recentWorkers")(function*(withinMin: number, max: number) {
  const paths = yield* Paths
  const files = layout(paths)
  const node = paths.fleet?.node
  const now = yield* Clock.currentTimeMillis
  const last = new Map<string, RunRecord | undefined>()
  for (const ref of yield* runDirs(Option.none())) {
    if (last.get(ref.worker) !== undefined) continue
    last.set(ref.worker, yield* readRunDir(files.runDir(ref.worker, ref.run_id)))
  }
  const ended: Array<{ readonly worker: string; readonly at: number }> = []
  for (const [worker, record] of last) {
    const at = record?.finished_at ? Date.parse(record.finished_at) : Number.NaN
    const ours = node === undefined || record?.node === undefined || record.node === node
    if (ours && Number.isFinite(at) && now - at <= withinMin * 60_000) ended.push({ worker, at })
  }
  return ended.sort((a, b) => b.at - a.at).slice(0, max).map((e) => e.worker)
})
