import { refuseTraced } from "../base/refuseTraced.js"
import { Effect, Schema } from "effect"
import type * as http from "node:http"
import { Gateway } from "../egress/Gateway.js"
import { placed, Refusal } from "../base/refusal.js"
import { forwardable } from "../base/headers.js"
import { injectGranted, type Target } from "./granted.js"
import { approvedNote, byRules } from "../egress/byRules.js"
import { refuseResponse } from "../base/refuse.js"
import { bodyLimit, isCheckedBody, parseChecked, readBody } from "../base/requestBody.js"
import { serverToolsReason, vetServerTools } from "../base/serverTools.js"
import { taintOnRefusal, taintSentinel } from "../base/taint.js"
import { isModelCall, startMeter } from "../metering/meter.js"
import type { GrantRule } from "../../config/schema.js"
import { sentinelWarning, warnRun } from "../base/runWarning.js"
import { bodyScanner, sentinelPlaces } from "../secrets/sentinelScan.js"
import { relay, relayedFields } from "./relay.js"
import { type GrantCache, grantFor } from "./grantCache.js"
import { auditTrace, type RequestTrace } from "../base/supervise.js"

/**
 * A body that may be a model request, read whole, checked before anything leaves: refused when it
 * declares provider-side tools its grant does not allow; sent as re-serialised.
 */
export const checkBody = (req: http.IncomingMessage, raw: Buffer, grant: GrantRule): { readonly refusal: Refusal } | Checked => {
  const parsed = parseChecked(req, raw)
  if (!parsed.ok) return { refusal: new Refusal(400, "the request body is declared JSON and does not parse", { why: "malformed" }) }
  if (parsed.json === undefined) return { body: raw, json: undefined }
  const vetted = vetServerTools(parsed.json, grant)
  if (!vetted.ok) return { refusal: new Refusal(403, serverToolsReason(grant, vetted), { why: "server_tools" }) }
  return { body: Buffer.from(JSON.stringify(parsed.json)), json: parsed.json }
}

interface Checked {
  readonly body: Buffer
  readonly json: unknown
}

const checkedBody = (req: http.IncomingMessage, grant: GrantRule | undefined, limit: number) =>
  Effect.gen(function*() {
    // An intercepted [[allow]] vets no model request (it injects no credential): its body streams as sent.
    if (!grant || !isCheckedBody(req)) return undefined
    const checked = checkBody(req, yield* readBody(req, limit), grant)
    return "refusal" in checked ? yield* Effect.fail(checked.refusal) : checked
  })

/** A body already read (a GraphQL or JSON-RPC rule needed it): checked as `checkedBody` checks one, else sent as read. */
const checkedRead = (req: http.IncomingMessage, raw: Buffer, grant: GrantRule | undefined) =>
  Effect.gen(function*() {
    if (!grant || !isCheckedBody(req)) return { body: raw, json: undefined } satisfies Checked
    const checked = checkBody(req, raw, grant)
    return "refusal" in checked ? yield* Effect.fail(checked.refusal) : checked
  })

/** The model a request names (`model` in its JSON body). */
export const modelOf = (json: unknown) => (namesModel(json) ? json.model : "unknown")
const namesModel = Schema.is(Schema.Struct({ model: Schema.String }))

/**
 * One request inside a terminated tunnel: re-authorised, the real credential in the one header
 * its kind uses, to the verified upstream (or the host's [[route]]), the answer scrubbed.
 */
export const injectForward = (target: Target, req: http.IncomingMessage, res: http.ServerResponse, trace: RequestTrace, grants: GrantCache) =>
  Effect.gen(function*() {
    const self = yield* Gateway
    const refuseAs = refuseTraced(self.taints, trace, (r) => refuseResponse(res, r))
    const refuse = (r: Refusal) => refuseAs(r, target.caller)
    const decided = yield* grantFor(target, grants).pipe(Effect.either)
    if (decided._tag === "Left") return yield* refuse(decided.left)
    const seen = decided.right
    const { agent, granted: { authorized, credential, entry, grant } } = seen
    const limit = bodyLimit(authorized.org)
    const ruled = yield* byRules(target, req, req.url ?? "/", entry, limit).pipe(Effect.either)
    if (ruled._tag === "Left") return yield* refuse(ruled.left)
    const { approvedBy, raw } = ruled.right
    const checkedOr = yield* (raw ? checkedRead(req, raw, grant) : checkedBody(req, grant, limit)).pipe(Effect.either)
    if (checkedOr._tag === "Left") return yield* refuse(checkedOr.left)
    const checked = checkedOr.right
    // A run's model call is metered, and refused once a budget is used up.
    const { runId, worker } = target.caller
    const started = isModelCall(req) && runId && worker
      ? yield* startMeter({ ...target.caller, runId, worker }, authorized.org, modelOf(checked?.json))
      : undefined
    // The worker's budgets as read now serve the connection's next calls while its grant does.
    if (started) grants.meteredBy(seen, started.limits)
    if (started?.refusal) return yield* refuse(started.refusal)
    const { headers, injected, reveals } = injectGranted(req.headers, credential)
    const out = forwardable(headers)
    if (checked) {
      out["content-length"] = String(checked.body.length)
      delete out["transfer-encoding"]
    }
    // The answer is scanned for the real value, so it must arrive uncompressed.
    out["accept-encoding"] = "identity"

    const body = bodyScanner()
    if (checked) body.feed(checked.body)
    // Loud, never silent: a sentinel that goes out anywhere taints the run (before the answer, when
    // it is known before sending), is audited by place and warned to the run.
    const inHead = sentinelPlaces(out, req.url ?? "/", req.method)
    const before = [...inHead, ...(body.found() ? ["body"] : [])]
    if (before.length > 0) yield* taintSentinel(self.taints, target.caller, target.host, before)
    const result = yield* relay(req, res, {
      out, agent, secrets: reveals, limit, onBody: checked ? () => {} : body.feed, checked: checked?.body, meter: started?.meter
    })
    started?.meter?.settle()
    const places = [...inHead, ...(body.found() ? ["body"] : [])]
    if (result.refusal) yield* taintOnRefusal(self.taints, target.caller, placed(result.refusal, trace))
    const fields = relayedFields(result, injected, places)
    yield* auditTrace(trace, approvedBy ? { ...fields, note: approvedNote(approvedBy, fields.note) } : fields)
    if (places.length > 0) {
      yield* warnRun(target.caller, sentinelWarning(target.host, places))
      if (before.length === 0) yield* taintSentinel(self.taints, target.caller, target.host, places)
    }
  })
