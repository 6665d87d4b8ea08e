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
import { taintOnRefusal, taintSentinel } from "../base/taint.js"
import { Gateway } from "../egress/Gateway.js"
import { isModelCall, type Meter, type MeterBasis, openMeter, overAtStart } from "../metering/meter.js"
import { checkBody, isCheckedBody, modelOf } from "../policy/bodyVet.js"
import { bodyLimitOf, decide } from "../policy/decide.js"
import type { Forward, Inject } from "../policy/verdict.js"
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
export const makeFastForward = Effect.fnUntraced(function*(grants: GrantCache) {
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
      self.fork(taintedBefore ? warned : Effect.zipRight(warned, taintSentinel(self.taints, target.caller, target.host, places)))
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
    if (taintedBefore) self.fork(Effect.zipRight(taintSentinel(self.taints, target.caller, target.host, ["body"]), Effect.sync(go)))
    else go()
  }

  /**
   * A body read whole and checked, then sent; a model call of a run metered. False, having read
   * nothing, when the call cannot be metered here (no budgets read on this connection yet, a
   * ledger that is not in memory) or would start past a budget (refused, and its run stopped, by
   * `injectForward`).
   */
  const sendChecked = (seen: GrantSeen, forward: Forward, inject: Inject, target: Target, req: http.IncomingMessage, res: http.ServerResponse, trace: RequestTrace, o: Outgoing) => {
    const { runId, worker } = target.caller
    let metered: { readonly caller: RunCaller; readonly basis: MeterBasis } | undefined
    if (isModelCall(req.method ?? "GET", forward.url) && runId && worker) {
      const spentNow = self.ledger.spentNow
      if (!seen.limits || !spentNow) return false
      const startedAt = new Date(trace.startedAt).toISOString()
      const basis = { limits: seen.limits, spent: spentNow(worker, runId, startedAt, target.caller.chatChannel), startedAt }
      if (overAtStart(basis)) return false
      metered = { caller: { ...target.caller, runId, worker }, basis }
    }
    const { policy } = seen.granted
    collectBody(req, bodyLimitOf(policy), (raw) =>
      guarded(res, trace, () => {
        const checked = raw instanceof Refusal ? { refusal: raw } : checkBody(String(req.headers["content-type"] ?? ""), raw, inject)
        if ("refusal" in checked) return refuse(target, res, trace, checked.refusal)
        o.out["content-length"] = String(checked.body.length)
        delete o.out["transfer-encoding"]
        const meter = metered && openMeter(self, self.runPromise, metered.caller, policy.org, modelOf(checked.json), metered.basis)
        send(seen, forward, target, req, res, trace, o, checked.body, meter)
      }))
    return true
  }

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
    const verdict = decide(seen.granted.policy, target.caller, askedIn(target, req))
    if (verdict._tag !== "Forward" || verdict.body !== undefined) return false
    const url = verdict.url
    if (grants.refreshDue(target, seen, now)) self.fork(refreshGrant(target, grants, seen))
    const { caller } = target
    const method = req.method ?? "GET"
    const trace: RequestTrace = {
      run_id: caller.runId, subject: caller.subject, caller, host: target.host, port: target.port, method, path: url.split("?")[0] ?? "/", startedAt: now
    }
    let taken = true
    guarded(res, trace, () => {
      const o = outgoing(seen, req, url)
      if (!o) taken = false
      // An intercepted [[allow]] vets no body (it injects nothing): its bodies stream as sent.
      else if (verdict.inject && isCheckedBody(method, String(req.headers["content-type"] ?? ""))) taken = sendChecked(seen, verdict, verdict.inject, target, req, res, trace, o)
      // A model call whose body is not one to read (an unusual content type) is metered there.
      else if (isModelCall(method, url)) taken = false
      else send(seen, verdict, target, req, res, trace, o, undefined, undefined)
    })
    return taken
  }

  return { tryForward }
})
