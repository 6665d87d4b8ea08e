import { Clock, Deferred, Effect, Option } from "effect"
import { preflightTimedOut, type PreflightResult } from "../../contract/preflight.js"
import { BoxBackend } from "../../backend/BoxBackend.js"
import { RunLog } from "../../run/RunLog.js"
import type { Caller, RunCaller } from "../base/identify.js"
import type { PreflightEntry } from "../base/preflights.js"
import { Refusal } from "../base/refusal.js"
import { Gateway } from "./Gateway.js"

/**
 * The run's preflight entry; the first time this gateway hears of the run, its record is asked
 * too (a daemon restarted mid-run, or an entry dropped, finds the decision there).
 */
export const preflightEntry = (caller: RunCaller) =>
  Effect.gen(function*() {
    const self = yield* Gateway
    const now = yield* Clock.currentTimeMillis
    const { entry, fresh } = yield* self.preflights.entry(caller.runId, now)
    if (fresh) {
      const recorded = (yield* (yield* RunLog).read(caller.worker, caller.runId))?.preflight
      if (recorded) yield* self.preflights.settle(entry, recorded)
    }
    return { entry, now }
  })

/**
 * Decides the run's preflight once: the record gets the result, and a failed one has the run's
 * box killed in the gateway's own scope (its requests are refused from now on). False when the
 * run's preflight was already decided.
 */
export const settlePreflight = (caller: RunCaller, entry: PreflightEntry, result: PreflightResult) =>
  Effect.gen(function*() {
    const self = yield* Gateway
    if (!(yield* self.preflights.settle(entry, result))) return false
    const { runId, worker } = caller
    yield* (yield* RunLog).append(worker, runId, { kind: "preflight", result }).pipe(
      Effect.catchAll((e) => Effect.logError(`gateway: run ${runId}: its preflight could not be recorded: ${e.message}`))
    )
    if (result.ok) return true
    yield* Effect.logWarning(`gateway: run ${runId} of ${worker}: its preflight failed (${result.detail}); its requests are refused and its box killed`)
    self.fork(Effect.flatMap(BoxBackend, (backend) => backend.killRun(runId)).pipe(Effect.asVoid,Effect.catchAll((e) => Effect.logError(`gateway: the box of run ${runId} (its preflight failed) could not be killed: ${e.message}`))))
    return true
  })

/**
 * Holds a run's request until its box's preflight is in — pi starts beside the check, so
 * nothing leaves the box before the check passes. No result within the wait fails the run's
 * preflight; a failed one refuses the request. A host caller (no run) is never held.
 */
export const awaitPreflight = (caller: Caller) =>
  Effect.gen(function*() {
    if (!caller.runId || !caller.worker) return
    const run = { ...caller, runId: caller.runId, worker: caller.worker }
    const self = yield* Gateway
    const { entry, now } = yield* preflightEntry(run)
    if (Option.isNone(yield* self.preflights.result(entry, now))) yield* settlePreflight(run, entry, preflightTimedOut)
    // Decided by now: by the box, or by this request's wait running out.
    const result = yield* Deferred.await(entry.result)
    if (!result.ok) {
      return yield* Effect.fail(new Refusal(403, `this run's box failed its preflight (${result.detail}): nothing of this run leaves the box, and the box is stopped`, {
        why: "preflight",
        subject: caller.subject
      }))
    }
  })
