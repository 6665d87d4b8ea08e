import { Effect } from "effect"
import type * as http from "node:http"
import { Gateway } from "../egress/Gateway.js"
import { placed, type Refusal } from "../base/refusal.js"
import { forwardable } from "../base/headers.js"
import { askedIn, injectGranted, type Target } from "./granted.js"
import { socketEnded } from "../egress/approve.js"
import { answeringRefusals, approvedNote, settle } from "../egress/decision.js"
import { refuseResponse } from "../base/refuse.js"
import { readBody } from "../base/requestBody.js"
import { taintOnRefusal, taintSentinelAfter, taintSentinelBefore } from "../base/taint.js"
import { isModelCall, startMeter } from "../metering/meter.js"
import { modelOf } from "../policy/bodyVet.js"
import { bodyLimitOf, decide } from "../policy/decide.js"
import { sentinelWarning, warnRun } from "../base/runWarning.js"
import { bodyScanner, sentinelPlaces } from "../secrets/sentinelScan.js"
import { relay, relayedFields } from "./relay.js"
import { type GrantCache, grantFor } from "./grantCache.js"
import { auditTrace, type RequestTrace } from "../base/supervise.js"

/**
 * One request inside a terminated tunnel: decided by the connection's policy (its body read first where
 * the decision asks, held where a rule asks a person), the real credential in the one header its kind
 * uses, to the verified upstream (or the host's [[route]]) on the path decided, the answer scrubbed.
 */
export const injectForward = (target: Target, req: http.IncomingMessage, res: http.ServerResponse, trace: RequestTrace, grants: GrantCache, read?: Buffer) =>
  Effect.gen(function*() {
    const self = yield* Gateway
    const seen = yield* grantFor(target, grants)
    const { agent, granted: { credential, policy } } = seen
    const asked = askedIn(target, req)
    // `read`: the body the fast path read before it found the request was not its to send.
    const { approvedBy, settled } = yield* settle(policy, asked, decide(policy, target.caller, asked), {
      caller: target.caller, readBody: (limit) => (read ? Effect.succeed(read) : readBody(req, limit)), closed: socketEnded(req.socket)
    })
    if (settled._tag !== "Forward") return yield* Effect.dieMessage(`a request in a tunnel was decided as a ${settled._tag}`)
    trace.path = settled.url.split("?")[0] ?? "/"
    const limit = bodyLimitOf(policy)
    // The body the decision read (a rule read it, or it was a grant's model request to check) goes whole, as checked.
    const checked = settled.body
    // A run's model call is metered, and refused once a budget is used up.
    const { runId, worker } = target.caller
    const started = isModelCall(req.method ?? "GET", settled.url) && runId && worker
      ? yield* startMeter({ ...target.caller, runId, worker }, policy.org, modelOf(checked?.json))
      : undefined
    // The worker's budgets as read now serve the connection's next calls while its grant does.
    if (started) grants.meteredBy(seen, started.limits)
    if (started?.refusal) return yield* Effect.fail(started.refusal)
    const { headers, injected, reveals } = injectGranted(req.headers, credential)
    const out = forwardable(headers)
    if (checked) {
      out["content-length"] = String(checked.raw.length)
      delete out["transfer-encoding"]
      if (checked.decoded) delete out["content-encoding"]
    }
    // The answer is scanned for the real value, so it must arrive uncompressed.
    out["accept-encoding"] = "identity"

    const body = bodyScanner()
    if (checked) body.feed(checked.raw)
    // Loud, never silent: a sentinel that goes out anywhere taints the run (before the answer, when
    // it is known before sending), is audited by place and warned to the run.
    const inHead = sentinelPlaces(out, settled.url, req.method)
    const before = [...inHead, ...(body.found() ? ["body"] : [])]
    if (before.length > 0) yield* taintSentinelBefore(self.taints, target.caller, target.host, before)
    const result = yield* relay(req, res, {
      path: settled.url, out, agent, secrets: reveals, limit, onBody: checked ? () => {} : body.feed, checked: checked?.raw, meter: started?.meter
    })
    started?.meter?.settle()
    const places = [...inHead, ...(body.found() ? ["body"] : [])]
    if (result.refusal) yield* taintOnRefusal(self.taints, target.caller, placed(result.refusal, trace))
    const fields = { ...relayedFields(result, injected, places), ...(settled.by ? { decided_by: `${settled.entry} ${settled.by}` } : {}) }
    yield* auditTrace(trace, approvedBy ? { ...fields, note: approvedNote(approvedBy, fields.note) } : fields)
    if (places.length > 0) {
      yield* warnRun(target.caller, sentinelWarning(target.host, places))
      if (before.length === 0) yield* taintSentinelAfter(self.taints, target.caller, target.host, places)
    }
  }).pipe(answeringRefusals(trace, (r: Refusal) => refuseResponse(res, r)))
