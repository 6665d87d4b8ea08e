import { Effect } from "effect"
import type * as http from "node:http"
import { Audit } from "../base/Audit.js"
import { forwardable } from "../base/headers.js"
import { placed, Refusal } from "../base/refusal.js"
import { refuseResponse } from "../base/refuse.js"
import { isCheckedBody } from "../base/requestBody.js"
import { sentinelWarning, warnRun } from "../base/runWarning.js"
import { type RequestTrace, type TraceFields, traceRecord } from "../base/supervise.js"
import { taintOnRefusal, taintSentinel } from "../base/taint.js"
import { Gateway } from "../egress/Gateway.js"
import { isModelCall } from "../metering/meter.js"
import { injectCredential } from "../secrets/inject.js"
import { bodyScanner, sentinelPlaces } from "../secrets/sentinelScan.js"
import type { GrantCache, GrantSeen } from "./grantCache.js"
import type { Target } from "./granted.js"
import { relayedFields, relayTo } from "./relay.js"

/**
 * The common request inside a terminated tunnel, handled without a fiber of its own: a request
 * whose body streams through (not a model call, not a body read whole and checked), on a
 * connection whose grant was decided within the last moment (grantCache), that carries no
 * sentinel anywhere but the header its credential goes in. It does what `injectForward` does for
 * such a request — the credential swapped in, the answer scrubbed, the body watched for a
 * sentinel, the audit line — in plain callbacks: under the daemon's small-heap V8 flags a fiber
 * and the decision's steps cost more than the proxying itself (docs/PERFORMANCE.md, change 19).
 * Anything else is `injectForward`'s, and is given to it before anything of the request is read.
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

  const finish = (target: Target, trace: RequestTrace, fields: TraceFields, refusal: Refusal | undefined) => {
    if (refusal) self.fork(taintOnRefusal(self.taints, target.caller, placed(refusal, trace)))
    audit.submit(traceRecord(trace, fields, clock.unsafeCurrentTimeMillis()))
    const places = fields.sentinel_unsubstituted ?? []
    if (places.length > 0) {
      self.fork(warnRun(target.caller, sentinelWarning(target.host, places)).pipe(
        Effect.zipRight(taintSentinel(self.taints, target.caller, target.host, places))
      ))
    }
  }

  const forward = (seen: GrantSeen, target: Target, req: http.IncomingMessage, res: http.ServerResponse, url: string, trace: RequestTrace) => {
    const { authorized, credential } = seen.granted
    const { headers, injected, reveals } = injectCredential(req.headers, credential.kind, credential.value)
    const out = forwardable(headers)
    // The answer is scanned for the real value, so it must arrive uncompressed.
    out["accept-encoding"] = "identity"
    // A sentinel in the head is tainted before anything is sent: injectForward's to do.
    if (sentinelPlaces(out, url, req.method).length > 0) return false
    const body = bodyScanner()
    const options = { out, agent: seen.agent, secrets: reveals, limit: authorized.org.gateway.max_body_mib * 1024 * 1024, onBody: body.feed, checked: undefined, meter: undefined }
    const cancel = relayTo(req, res, options, (r) => {
      inFlight.delete(cancel)
      finish(target, trace, relayedFields(r, injected, body.found() ? ["body"] : []), r.refusal)
    })
    inFlight.add(cancel)
    return true
  }

  /**
   * Handles the request when it is one of the common kind and its connection's grant is fresh;
   * false, having read and sent nothing, when `injectForward` must.
   */
  const tryForward = (target: Target, req: http.IncomingMessage, res: http.ServerResponse): boolean => {
    const url = req.url ?? "/"
    if (!url.startsWith("/") || isCheckedBody(req) || isModelCall(req)) return false
    const now = clock.unsafeCurrentTimeMillis()
    const seen = grants.fresh(target, now)
    if (!seen) return false
    const { caller } = target
    const trace: RequestTrace = {
      run_id: caller.runId, subject: caller.subject, host: target.host, port: target.port, method: req.method ?? "GET", path: url.split("?")[0] ?? "/", startedAt: now
    }
    try {
      return forward(seen, target, req, res, url, trace)
    } catch (cause) {
      // As `supervised`: logged with the request, a 500 to the box, still audited.
      self.fork(Effect.logError(`gateway: unexpected failure on ${trace.method} ${trace.host}:${trace.port}${trace.path} for run ${trace.run_id ?? "-"} (${trace.subject})`, cause))
      refuseResponse(res, new Refusal(500, "internal error"))
      audit.submit(traceRecord(trace, { status: 500, note: "internal error in the gateway (see its log)" }, clock.unsafeCurrentTimeMillis()))
      return true
    }
  }

  return { tryForward }
})
