import { Clock, Effect } from "effect"
import { openTaints, type TaintReason, taintLine } from "../../contract/taint.js"
import { MemoryStore } from "../../memory/MemoryStore.js"
import { RunLog } from "../../run/RunLog.js"
import type { Caller } from "./identify.js"
import type { Refusal, RefusalWhy } from "./refusal.js"

/** A run keeps at most this many taints: a box cannot grow its record by misbehaving. */
const MAX_TAINTS = 20

/** Refusals that taint the run: it asked for a way out no rule gives. */
const TAINTING: ReadonlySet<RefusalWhy> = new Set([
  "no_rule", "wrong_port", "request_rule", "ambiguous", "refused_address", "gateway_itself", "server_tools", "misdirected"
])

/** The taint a tainting refusal gives its run. */
const taintReasonOf = (why: RefusalWhy): TaintReason => (why === "server_tools" ? "server_tools" : why === "misdirected" ? "misdirected" : "egress_refused")

/**
 * Taints already written, remembered for a few seconds: a box hammering one refused host costs
 * the run record one line, not a read per request. Short, so a person's untaint of a live run
 * is followed by a fresh taint if the box keeps at it.
 */
export const makeTaintMemo = (ttlMs = 5_000) => {
  const seen = new Map<string, number>()
  return {
    fresh: (key: string, now: number) => {
      const until = seen.get(key)
      if (until !== undefined && until > now) return false
      if (seen.size > 10_000) seen.clear()
      seen.set(key, now + ttlMs)
      return true
    }
  }
}
export type TaintMemo = ReturnType<typeof makeTaintMemo>

/**
 * Marks the caller's run tainted (once per reason and host), appended to its events so no
 * rewrite of run.json by its runner can drop it. A host caller has no run; a record that cannot
 * be written is logged, never fatal to the request.
 */
export const taintRun = (memo: TaintMemo, caller: Caller, reason: TaintReason, host: string | null, detail: string) =>
  Effect.gen(function*() {
    if (!caller.runId || !caller.worker) return
    const now = yield* Clock.currentTimeMillis
    if (!memo.fresh(`${caller.runId}\0${reason}\0${host ?? ""}`, now)) return
    const runLog = yield* RunLog
    const run = yield* runLog.read(caller.worker, caller.runId)
    if (!run) return
    const known = run.tainted ?? []
    if (openTaints(run).some((t) => t.reason === reason && t.host === host) || known.length >= MAX_TAINTS) return
    yield* Effect.logWarning(`gateway: run ${caller.runId} (${caller.subject}) tainted: ${reason}${host ? ` ${host}` : ""} (${detail})`)
    const taint = { reason, host, time: new Date(now).toISOString(), detail }
    yield* runLog.append(caller.worker, caller.runId, { kind: "taint", taint })
    // What the run remembered before it was tainted is held for review too: its memory is no better than its work.
    const held = yield* (yield* MemoryStore).holdRun(caller.worker, caller.runId, taintLine(taint))
    if (held > 0) yield* Effect.logWarning(`gateway: run ${caller.runId}: ${held} memory ${held === 1 ? "entry" : "entries"} it wrote held for review`)
  }).pipe(Effect.catchAll((e) => Effect.logWarning(`gateway: a run's taint could not be recorded: ${e.message}`)))

/** Taints the run whose request left the gateway with a sentinel, by place (never by value). */
export const taintSentinel = (memo: TaintMemo, caller: Caller, host: string, places: ReadonlyArray<string>) =>
  taintRun(memo, caller, "sentinel_upstream", host, `the placeholder went out in ${places.join(", ")}`)

/** Taints the run when the refusal is one of egress no rule gives. */
export const taintOnRefusal = (memo: TaintMemo, caller: Caller | undefined, r: Refusal) =>
  caller && TAINTING.has(r.detail.why)
    ? taintRun(memo, caller, taintReasonOf(r.detail.why), r.detail.host ?? null, r.detail.why === "misdirected" ? r.reason : r.detail.why)
    : Effect.void
