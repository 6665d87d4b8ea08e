import { Clock, Effect } from "effect"
import type { RunOrigin } from "../contract/origin.js"
import { openTaints, type Taint, taintLine } from "../contract/taint.js"
import { RunLog } from "../run/RunLog.js"

/** A run whose work or words a new run carries: which, whose, and how they reach it. */
export interface TaintSource {
  readonly worker: string
  readonly runId: string
  /** How its work reaches the new run, in words: "continues", "queued it", "the channel's history", … */
  readonly via: "continues" | "queued" | "words"
  /** Where its words are, for "words": the channel's history, a reply, … */
  readonly where?: string
}

/** The runs a new run carries on from: the one it continues, and the one that queued its task (set_tasks, a chat session's follow-up). */
export const taintSources = (worker: string, origin: RunOrigin, continues: { readonly run_id: string } | null): ReadonlyArray<TaintSource> => {
  const sources: Array<TaintSource> = []
  if (continues) sources.push({ worker, runId: continues.run_id, via: "continues" })
  if (origin._tag === "queue" && origin.queued_by.by === "self" && origin.queued_by.run_id !== null && origin.queued_by.run_id !== continues?.run_id) {
    sources.push({ worker, runId: origin.queued_by.run_id, via: "queued" })
  }
  return sources
}

const carried = (s: TaintSource) =>
  s.via === "words" ? `its input carries the words of tainted run ${s.runId} of ${s.worker} (${s.where ?? "its input"})` : `carries on from tainted run ${s.runId}`

/** The taint a run takes from a tainted source: its own, naming the source and how it came (null when the source is not tainted). */
export const taintFrom = Effect.fn("run.taintFrom")(function*(source: TaintSource) {
  const from = yield* (yield* RunLog).read(source.worker, source.runId)
  const open = from ? openTaints(from) : []
  if (open.length === 0) return null
  return {
    reason: "inherited",
    host: null,
    time: new Date(yield* Clock.currentTimeMillis).toISOString(),
    detail: `${carried(source)} (${taintLine(open[0] as Taint)})`,
    inherited_from: source.runId
  } satisfies Taint
})

/**
 * Taint follows the work and the words: a run that carries on from a tainted run (of the same
 * worker), or whose input carries a tainted run's words (a channel's history, a reply), starts
 * tainted itself, its record saying from which run and how — written before its box exists, so its
 * knowledge_push is quarantined and its remember pending from its first request. Each is its own
 * decision: untainting the source later does not untaint it.
 */
export const inheritTaints = Effect.fn("run.inheritTaints")(function*(worker: string, runId: string, sources: ReadonlyArray<TaintSource>) {
  const runLog = yield* RunLog
  const inherited: Array<Taint> = []
  for (const source of sources) {
    if (source.runId === runId) continue
    const taint = yield* taintFrom(source)
    if (taint === null) continue
    yield* runLog.append(worker, runId, { kind: "taint", taint })
    inherited.push(taint)
  }
  return inherited
})

/** A run given something whose taint cannot be known (a store's marks that cannot be read) starts tainted, saying why. */
export const unknownTaints = Effect.fn("run.unknownTaints")(function*(worker: string, runId: string, why: ReadonlyArray<string>) {
  const runLog = yield* RunLog
  const out: Array<Taint> = []
  for (const detail of why) {
    const taint = { reason: "inherited", host: null, time: new Date(yield* Clock.currentTimeMillis).toISOString(), detail: `${detail}: a run given it starts tainted` } satisfies Taint
    yield* runLog.append(worker, runId, { kind: "taint", taint })
    out.push(taint)
  }
  return out
})
