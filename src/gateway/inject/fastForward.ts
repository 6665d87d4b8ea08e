import { Effect } from "effect"
import type * as http from "node:http"
import { Audit } from "../base/Audit.js"
import type { RunCaller } from "../base/identify.js"
import { forwardable } from "../base/headers.js"
import { placed, Refusal } from "../base/refusal.js"
import { refuseResponse } from "../base/refuse.js"
import { refuseTraced } from "../base/refuseTraced.js"
import { collectBody } from "../base/requestBody.js"
import { sentinelWarning, warnRun } from "../base/runWarning.js"
import { type RequestTrace, type TraceFields, traceRecord } from "../base/supervise.js"
import { taintOnRefusal, taintSentinelAfter, taintSentinelBefore } from "../base/taint.js"
import { Gateway } from "../egress/Gateway.js"
import { isModelCall, type Meter, type MeterBasis, openMeter, overAtStart } from "../metering/meter.js"
import type { AskedRequest } from "../policy/asked.js"
import { modelOf } from "../policy/bodyVet.js"
import { bodyLimitOf, decide } from "../policy/decide.js"
import type { Forward } from "../policy/verdict.js"
import { bodyScanner, sentinelPlaces } from "../secrets/sentinelScan.js"
import { type GrantCache, type GrantSeen, refreshGrant } from "./grantCache.js"
import { askedIn, injectGranted, type Target } from "./granted.js"
import { relayedFields, relayTo } from "./relay.js"

/** What goes out of a request: its head with the credential in, and what to scrub from the answer. */
interface Outgoing {
  readonly out: http.OutgoingHttpHeaders
  readonly injected: boolean
  readonly reveals: ReadonlyArray<string>
}

const noBody = () => {}

/**
 * The common request inside a terminated tunnel, handled without a fiber of its own: on a
 * connection whose grant was decided within the last moment (grantCache), carrying no sentinel
 * in its head but in the header its credential goes in. Its body streams through, or — JSON or
 * text, a model call among them — is read whole and checked first; a model call of a run is
 * metered against the budgets its connection last read (`GrantSeen.limits`) and what the ledger
 * holds in memory. It does what `injectForward` does for such a request — the credential swapped
 * in, the answer scrubbed (and its usage read), the body watched for a sentinel, the audit line —
 * in plain callbacks: under the daemon's small-heap V8 flags a fiber and the decision's steps cost
 * more than the proxying itself (docs/PERFORMANCE.md, changes 19 and 20). The rare turns (a taint
 * to write before the answer, a refusal) run as Effects in the gateway's scope. Anything else —
 * a call that would start past a budget, a fleet's ledger — is `injectForward`'s, and is given to
 * it before anything of the request is read.
 */
export const makeFastForward = Effect.fnUntraced(function*(
  grants: GrantCache,
  /** Hands a request whose body it read, and which is not then a plain forward, to `injectForward`. */
  slow: (target: Target, req: http.IncomingMessage, res: http.ServerResponse, read: Buffer) => void
) {
  const self = yield* Gateway
  const audit = yield* Audit
  const clock = yield* Effect.clock
  // The answers under way, each cancelled with the gateway (as a request's fiber is interrupted).
  const inFlight = new Set<() => void>()
  yield* Effect.addFinalizer(() =>
    Effect.sync(() => {
      for (const cancel of inFlight) cancel()
      inFlight.clear()
    })
  )

  const finish = (target: Target, trace: RequestTrace, fields: TraceFields, refusal: Refusal | undefined, taintedBefore: boolean) => {
    if (refusal) self.fork(taintOnRefusal(self.taints, target.caller, placed(refusal, trace)))
    audit.submit(traceRecord(trace, fields, clock.unsafeCurrentTimeMillis()))
    const places = fields.sentinel_unsubstituted ?? []
    if (places.length > 0) {
      const warned = warnRun(target.caller, sentinelWarning(target.host, places))
      self.fork(taintedBefore ? warned : Effect.zipRight(warned, taintSentinelAfter(self.taints, target.caller, target.host, places)))
    }
  }

  /** A refusal as every handler gives it (the run tainted before the box hears it): rare, so a fiber. */
  const refuse = (target: Target, res: http.ServerResponse, trace: RequestTrace, r: Refusal) =>
    self.fork(refuseTraced(self.taints, trace, (p) => refuseResponse(res, p))(r, target.caller))

  /** The credential in; undefined when a sentinel is elsewhere in the head (tainted before sending: `injectForward`'s to do). */
  const outgoing = (seen: GrantSeen, req: http.IncomingMessage, url: string): Outgoing | undefined => {
    const { credential } = seen.granted
    const { headers, injected, reveals } = injectGranted(req.headers, credential)
    const out = forwardable(headers)
    // The answer is scanned for the real value, so it must arrive uncompressed.
    out["accept-encoding"] = "identity"
    return sentinelPlaces(out, url, req.method).length > 0 ? undefined : { out, injected, reveals }
  }

  /** Sends the request (its checked body, or streaming it) on the path decided and the answer back, then finishes it. */
  const send = (seen: GrantSeen, forward: Forward, target: Target, req: http.IncomingMessage, res: http.ServerResponse, trace: RequestTrace, o: Outgoing, checked: Buffer | undefined, meter: Meter | undefined) => {
    const body = bodyScanner()
    if (checked) body.feed(checked)
    // A sentinel in a checked body is known before it leaves: the run is tainted first.
    const taintedBefore = body.found()
    const decided = forward.by ? { decided_by: `${forward.entry} ${forward.by}` } : {}
    const go = () => {
      const limit = bodyLimitOf(seen.granted.policy)
      const options = { path: forward.url, out: o.out, agent: seen.agent, secrets: o.reveals, limit, onBody: checked ? noBody : body.feed, checked, meter }
      const cancel = relayTo(req, res, options, (r) => {
        inFlight.delete(cancel)
        meter?.settle()
        finish(target, trace, { ...relayedFields(r, o.injected, body.found() ? ["body"] : []), ...decided }, r.refusal, taintedBefore)
      })
      inFlight.add(cancel)
    }
    // Tainted first; a taint that cannot be written refuses the request instead (nothing of it has left).
    if (taintedBefore) {
      self.fork(taintSentinelBefore(self.taints, target.caller, target.host, ["body"]).pipe(
        Effect.matchEffect({ onSuccess: () => Effect.sync(go), onFailure: (r) => refuseTraced(self.taints, trace, (p) => refuseResponse(res, p))(r, target.caller) })
      ))
    }
    else go()
  }

  /**
   * How a model call of a run is metered here, without a fiber: against the budgets its connection's last
   * call read and the ledger's spending in memory. Undefined when the request is not a run's model call;
   * false when it cannot be metered here (no budgets read on this connection yet, a ledger not in memory)
   * or would start past a budget (refused, and its run stopped, by `injectForward`).
   */
  const meterBasis = (seen: GrantSeen, target: Target, method: string, url: string, startedAt: number) => {
    const { runId, worker } = target.caller
    if (!isModelCall(method, url) || !runId || !worker) return undefined
    const spentNow = self.ledger.spentNow
    if (!seen.limits || !spentNow) return false
    const at = new Date(startedAt).toISOString()
    const basis: MeterBasis = { limits: seen.limits, spent: spentNow(worker, runId, at, target.caller.chatChannel), startedAt: at }
    if (overAtStart(basis)) return false
    return { caller: { ...target.caller, runId, worker } satisfies RunCaller, basis }
  }

  /**
   * The body read whole, the request decided again with it (a grant's model request checked, a rule that
   * reads it applied), then sent as checked, a model call metered. A request that is not then a plain
   * forward (a refusal, a hold) is `injectForward`'s, given the body read.
   */
  const sendRead = (
    seen: GrantSeen, target: Target, req: http.IncomingMessage, res: http.ServerResponse, trace: RequestTrace, asked: AskedRequest, limit: number, o: Outgoing,
    metered: { readonly caller: RunCaller; readonly basis: MeterBasis } | undefined
  ) =>
    collectBody(req, limit, (raw) =>
      guarded(res, trace, () => {
        if (raw instanceof Refusal) return refuse(target, res, trace, raw)
        const verdict = decide(seen.granted.policy, target.caller, { ...asked, body: { raw } })
        if (verdict._tag !== "Forward" || verdict.body === undefined) return slow(target, req, res, raw)
        trace.path = verdict.url.split("?")[0] ?? "/"
        o.out["content-length"] = String(verdict.body.raw.length)
        delete o.out["transfer-encoding"]
        if (verdict.body.decoded) delete o.out["content-encoding"]
        const meter = metered && openMeter(self, self.runPromise, metered.caller, seen.granted.policy.org, modelOf(verdict.body.json), metered.basis)
        send(seen, verdict, target, req, res, trace, o, verdict.body.raw, meter)
      }))

  /** As `supervised` for a fiber: an unexpected failure is logged with its request, a 500 to the box, still audited. */
  const guarded = (res: http.ServerResponse, trace: RequestTrace, work: () => void) => {
    try {
      work()
    } catch (cause) {
      self.fork(Effect.logError(`gateway: unexpected failure on ${trace.method} ${trace.host}:${trace.port}${trace.path} for run ${trace.run_id ?? "-"} (${trace.subject})`, cause))
      refuseResponse(res, new Refusal(500, "internal error"))
      audit.submit(traceRecord(trace, { status: 500, note: "internal error in the gateway (see its log)" }, clock.unsafeCurrentTimeMillis()))
    }
  }

  /**
   * Handles the request when it is one of the common kind and its connection's grant is fresh: the one
   * decision, on the connection's policy, lets it through as sent or on its canonical path. False, having
   * read and sent nothing, when `injectForward` must: a refusal, a hold, a body to read before deciding.
   */
  const tryForward = (target: Target, req: http.IncomingMessage, res: http.ServerResponse): boolean => {
    const now = clock.unsafeCurrentTimeMillis()
    const seen = grants.fresh(target, now)
    if (!seen) return false
    const asked = askedIn(target, req)
    const verdict = decide(seen.granted.policy, target.caller, asked)
    if (verdict._tag !== "Forward" && verdict._tag !== "ReadBody") return false
    const url = verdict._tag === "Forward" ? verdict.url : asked.target
    if (grants.refreshDue(target, seen, now)) self.fork(refreshGrant(target, grants, seen))
    const { caller } = target
    const method = req.method ?? "GET"
    const trace: RequestTrace = {
      run_id: caller.runId, subject: caller.subject, caller, host: target.host, port: target.port, method, path: url.split("?")[0] ?? "/", startedAt: now
    }
    let taken = true
    guarded(res, trace, () => {
      const o = outgoing(seen, req, url)
      const metered = meterBasis(seen, target, method, url, now)
      if (!o || metered === false) taken = false
      // Its body decides it (a grant's model request to check, a rule that reads it): read here, then decided again.
      else if (verdict._tag === "ReadBody") sendRead(seen, target, req, res, trace, asked, verdict.limit, o, metered)
      // A model call whose body was not read (an unusual content type) is metered there.
      else if (metered !== undefined) taken = false
      else send(seen, verdict, target, req, res, trace, o, undefined, undefined)
    })
    return taken
  }

  return { tryForward }
})
