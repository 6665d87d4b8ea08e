import { Clock, Effect } from "effect"
import type { RunOrigin } from "../contract/origin.js"
import { openTaints, type Taint, taintLine } from "../contract/taint.js"
import { RunLog } from "../run/RunLog.js"

/** The runs a new run carries on from: the one it continues, and the one that queued its task (set_tasks, a chat session's follow-up). */
export const taintSources = (origin: RunOrigin, continues: { readonly run_id: string } | null): ReadonlyArray<string> => {
  const sources = new Set<string>()
  if (continues) sources.add(continues.run_id)
  if (origin._tag === "queue" && origin.queued_by.by === "self" && origin.queued_by.run_id !== null) sources.add(origin.queued_by.run_id)
  return [...sources]
}

/**
 * Taint follows the work: a run that carries on from a tainted run (of the same worker) starts
 * tainted itself, its record saying from which run and why — written before its box exists, so
 * its knowledge_push is quarantined and its remember pending from its first request. Each is its
 * own decision: untainting the source later does not untaint it.
 */
export const inheritTaints = Effect.fn("run.inheritTaints")(function*(worker: string, runId: string, sources: ReadonlyArray<string>) {
  const runLog = yield* RunLog
  const inherited: Array<Taint> = []
  for (const source of sources) {
    const from = yield* runLog.read(worker, source)
    const open = from ? openTaints(from) : []
    if (open.length === 0) continue
    const taint: Taint = {
      reason: "inherited",
      host: null,
      time: new Date(yield* Clock.currentTimeMillis).toISOString(),
      detail: `carries on from tainted run ${source} (${taintLine(open[0] as Taint)})`,
      inherited_from: source
    }
    yield* runLog.append(worker, runId, { kind: "taint", taint })
    inherited.push(taint)
  }
  return inherited
})
