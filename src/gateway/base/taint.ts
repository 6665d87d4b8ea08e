import { Clock, Data, Effect } from "effect"
import { BoxBackend } from "../../backend/BoxBackend.js"
import { openTaints, type TaintReason, taintLine } from "../../contract/taint.js"
import { MemoryStore } from "../../memory/MemoryStore.js"
import { RunLog } from "../../run/RunLog.js"
import type { Caller } from "./identify.js"
import { Refusal, type RefusalWhy } from "./refusal.js"
import { warnRun } from "./runWarning.js"

/**
 * A run holds at most this many taints no person has cleared: a box cannot grow its record by
 * misbehaving. Past it the run is stopped, not left to go on unrecorded; taints a person cleared do not
 * count (a box that reached the cap, then was untainted, is tainted again by its next refusal).
 */
export const MAX_OPEN_TAINTS = 20

/** Refusals that taint the run: it asked for a way out no rule gives. */
const TAINTING: ReadonlySet<RefusalWhy> = new Set([
  "no_rule", "wrong_port", "request_rule", "ambiguous", "refused_address", "gateway_itself", "server_tools", "misdirected"
])

/** The taint a tainting refusal gives its run. */
const taintReasonOf = (why: RefusalWhy): TaintReason => (why === "server_tools" ? "server_tools" : why === "misdirected" ? "misdirected" : "egress_refused")

/** A taint the run's record could not take: what it would have held is refused instead (fail closed). */
export class TaintUnrecorded extends Data.TaggedError("TaintUnrecorded")<{ readonly runId: string; readonly detail: string }> {
  override get message() {
    return `this run's taint could not be recorded (${this.detail}): what it would have held is refused — check the data folder's disk and permissions`
  }
}

/**
 * Taints written lately, remembered for a few seconds: a box hammering one refused host costs the run
 * record one line, not a read per request. Short, so a person's untaint of a live run is followed by a
 * fresh taint if the box keeps at it. And the runs whose taint could not be written: their gated actions
 * (a push, a memory, a follow-up) are refused for as long as the gateway runs.
 */
export const makeTaintMemo = (ttlMs = 5_000) => {
  const seen = new Map<string, number>()
  const lost = new Set<string>()
  const stopped = new Set<string>()
  return {
    fresh: (key: string, now: number) => {
      const until = seen.get(key)
      if (until !== undefined && until > now) return false
      if (seen.size > 10_000) seen.clear()
      seen.set(key, now + ttlMs)
      return true
    },
    /** A key written lately is written again at its next turn (its write failed). */
    forget: (key: string) => void seen.delete(key),
    /** True the first time only: a run is stopped for its taints once. */
    stopOnce: (runId: string) => !stopped.has(runId) && Boolean(stopped.add(runId)),
    /** The run has a taint its record could not take. */
    unrecorded: (runId: string) => void lost.add(runId),
    isUnrecorded: (runId: string) => lost.has(runId)
  }
}
export type TaintMemo = ReturnType<typeof makeTaintMemo>

/**
 * Marks the caller's run tainted (once per reason and host), appended to its events so no rewrite of
 * run.json by its runner can drop it. A host caller has no run. Past MAX_OPEN_TAINTS open taints the run
 * is stopped (its box killed, its end `tainted`). A taint that cannot be written fails with
 * TaintUnrecorded: the caller refuses what it would have let through ({@link taintOrHold} otherwise).
 */
export const taintRun = (memo: TaintMemo, caller: Caller, reason: TaintReason, host: string | null, detail: string) =>
  Effect.gen(function*() {
    if (!caller.runId || !caller.worker) return
    const runId = caller.runId
    const worker = caller.worker
    const now = yield* Clock.currentTimeMillis
    const key = `${runId}\0${reason}\0${host ?? ""}`
    if (!memo.fresh(key, now)) return
    const written = Effect.gen(function*() {
      const runLog = yield* RunLog
      const run = yield* runLog.read(worker, runId)
      if (!run) return
      const open = openTaints(run)
      if (open.some((t) => t.reason === reason && t.host === host)) return
      if (open.length >= MAX_OPEN_TAINTS) return yield* stopTainted(memo, caller, runId, worker, `${reason}${host ? ` ${host}` : ""}`)
      yield* Effect.logWarning(`gateway: run ${runId} (${caller.subject}) tainted: ${reason}${host ? ` ${host}` : ""} (${detail})`)
      const taint = { reason, host, time: new Date(now).toISOString(), detail }
      yield* runLog.append(worker, runId, { kind: "taint", taint })
      // What the run remembered before it was tainted is held for review too: its memory is no better than its work.
      const held = yield* (yield* MemoryStore).holdRun(worker, runId, taintLine(taint))
      if (held > 0) yield* Effect.logWarning(`gateway: run ${runId}: ${held} memory ${held === 1 ? "entry" : "entries"} it wrote held for review`)
    })
    yield* written.pipe(
      Effect.catchAll((e) =>
        Effect.sync(() => memo.forget(key)).pipe(Effect.andThen(Effect.fail(new TaintUnrecorded({ runId, detail: e.message }))))
      )
    )
  })

/**
 * A run past MAX_OPEN_TAINTS: stopped once — the stop in its record (it ends `tainted`), its box killed —
 * rather than going on with what it does next unrecorded.
 */
const stopTainted = (memo: TaintMemo, caller: Caller, runId: string, worker: string, what: string) =>
  Effect.gen(function*() {
    if (!memo.stopOnce(runId)) return
    const detail = `it was tainted ${MAX_OPEN_TAINTS} times no person has cleared, and again (${what}): stopped, its work quarantined — see: roster runs show ${runId}`
    yield* Effect.logWarning(`gateway: run ${runId} (${caller.subject}) stopped: ${detail}`)
    yield* (yield* RunLog).append(worker, runId, { kind: "stop", by: "tainted", detail })
    yield* (yield* BoxBackend).killRun(runId).pipe(
      Effect.catchAll((e) => Effect.logError(`gateway: the box of run ${runId} (stopped for its taints) could not be killed: ${e.message}`))
    )
  })

/**
 * `taintRun` where what the taint would hold has already gone (a refusal answered, a body streamed): a
 * taint that cannot be written holds the run's gated actions instead, and is said in its warnings.
 */
export const taintOrHold = (memo: TaintMemo, caller: Caller, reason: TaintReason, host: string | null, detail: string) =>
  taintRun(memo, caller, reason, host, detail).pipe(Effect.catchAll((e) => holdUnrecorded(memo, caller, e)))

const holdUnrecorded = (memo: TaintMemo, caller: Caller, e: TaintUnrecorded) =>
  Effect.gen(function*() {
    memo.unrecorded(e.runId)
    yield* Effect.logError(`gateway: run ${e.runId} (${caller.subject}): ${e.message}; its pushes, memories and follow-ups are refused`)
    yield* warnRun(caller, `a taint of this run could not be recorded (${e.detail}): its knowledge_push, remember, forget and set_tasks are refused`)
  })

/** Taints the run whose request left (or would leave) the gateway with a sentinel, by place (never by value). */
export const taintSentinel = (memo: TaintMemo, caller: Caller, host: string, places: ReadonlyArray<string>) =>
  taintRun(memo, caller, "sentinel_upstream", host, `the placeholder went out in ${places.join(", ")}`)

/** `taintSentinel` before anything of the request is sent: a taint that cannot be written refuses the request (503). */
export const taintSentinelBefore = (memo: TaintMemo, caller: Caller, host: string, places: ReadonlyArray<string>) =>
  taintSentinel(memo, caller, host, places).pipe(
    Effect.catchAll((e) => holdUnrecorded(memo, caller, e).pipe(Effect.andThen(Effect.fail(unrecordedRefusal(e)))))
  )

/** The answer to a request whose taint could not be recorded: refused, saying why. */
export const unrecordedRefusal = (e: TaintUnrecorded) => new Refusal(503, e.message, { why: "taint_unrecorded" })

/** `taintSentinel` for a request already sent: a taint that cannot be written holds the run's gated actions. */
export const taintSentinelAfter = (memo: TaintMemo, caller: Caller, host: string, places: ReadonlyArray<string>) =>
  taintSentinel(memo, caller, host, places).pipe(Effect.catchAll((e) => holdUnrecorded(memo, caller, e)))

/** Taints the run when the refusal is one of egress no rule gives (the request is refused either way: an unwritten taint holds its gated actions). */
export const taintOnRefusal = (memo: TaintMemo, caller: Caller | undefined, r: Refusal) =>
  caller && TAINTING.has(r.detail.why)
    ? taintOrHold(memo, caller, taintReasonOf(r.detail.why), r.detail.host ?? null, r.detail.why === "misdirected" ? r.reason : r.detail.why)
    : Effect.void
