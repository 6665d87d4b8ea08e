import { refuseTraced } from "../base/refuseTraced.js"
import { Effect, Option, Schema } from "effect"
import * as http from "node:http"
import { SENTINEL } from "../../contract/constants.js"
import { Gateway } from "../egress/Gateway.js"
import { placed, Refusal } from "../base/refusal.js"
import { forwardable, responsePairs } from "../base/headers.js"
import { grantedCredential, openUpstream, type Target } from "./granted.js"
import { injectCredential } from "../secrets/inject.js"
import { refuseResponse } from "../base/refuse.js"
import { PooledRefusal } from "../upstream/upstreamPool.js"
import { isCheckedBody, parseChecked, readBody } from "../base/requestBody.js"
import { serverToolsReason, vetServerTools } from "../base/serverTools.js"
import { taintOnRefusal, taintRun } from "../base/taint.js"
import { isModelCall, type Meter, startMeter } from "../metering/meter.js"
import type { GrantRule } from "../../config/schema.js"
import { sentinelWarning, warnRun } from "../base/runWarning.js"
import { bodyScanner, sentinelPlaces } from "../secrets/sentinelScan.js"
import { Scrub, scrubText } from "../secrets/scrub.js"
import { answerDecoding } from "../metering/decodeAnswer.js"
import { auditTrace, type RequestTrace } from "../base/supervise.js"

interface Relayed {
  readonly status: number
  readonly up: number
  readonly down: number
  readonly note?: string
  /** The dial was refused by policy (a name resolving to a private address, say). */
  readonly refusal?: Refusal
}

interface RelayOptions {
  readonly out: http.OutgoingHttpHeaders
  readonly agent: http.Agent
  /** Real values to scrub from the answer. */
  readonly secrets: ReadonlyArray<string>
  /** Largest streamed request body. */
  readonly limit: number
  readonly onBody: (chunk: Buffer) => void
  /** The body, read whole and checked; absent, the request streams through. */
  readonly checked: Buffer | undefined
  /** A model call's meter: reads the answer's usage, and may cut it at its budget. */
  readonly meter: Meter | undefined
}

/** The request to the upstream and the answer back, the real value scrubbed out, streaming intact, the body capped. */
const relay = (req: http.IncomingMessage, res: http.ServerResponse, o: RelayOptions) =>
  Effect.async<Relayed>((resume) => {
    let up = 0
    let down = 0
    let cut = false
    const upReq = http.request({ method: req.method ?? "GET", path: req.url ?? "/", headers: o.out, agent: o.agent }, (upRes) => {
      // Only bytes the scrubber can read reach the box: a compressed answer is decoded first.
      const decoding = answerDecoding(upRes.headers["content-encoding"])
      if (!decoding.ok) {
        upReq.destroy()
        const refusal = new Refusal(502, `the upstream answered in a content-encoding roster cannot scrub (${decoding.coding})`, { why: "encoding" })
        refuseResponse(res, refusal)
        return resume(Effect.succeed({ status: 502, up, down, note: refusal.reason }))
      }
      // Length may change when a secret is scrubbed: the box gets a chunked answer instead.
      res.writeHead(
        upRes.statusCode ?? 502,
        responsePairs(upRes.rawHeaders, new Set(["content-length", "content-encoding"]), (v) => scrubText(v, o.secrets, SENTINEL))
      )
      res.flushHeaders()
      upRes.on("data", (c: Buffer) => (down += c.length))
      const status = upRes.statusCode ?? 502
      const tap = o.meter?.tap(String(upRes.headers["content-type"] ?? ""), () => {
        cut = true
        upReq.destroy()
      })
      const scrub = new Scrub(o.secrets, Buffer.from(SENTINEL))
      const stages = [...decoding.decoders, ...(tap ? [tap] : []), scrub]
      for (const stage of decoding.decoders) {
        // A body that does not decode is cut, never passed on as it came.
        stage.once("error", (e) => {
          upReq.destroy()
          res.destroy()
          resume(Effect.succeed({ status: 502, up, down, note: `the answer did not decode: ${e.message}` }))
        })
      }
      stages.reduce<NodeJS.ReadableStream>((from, stage) => from.pipe(stage), upRes).pipe(res)
      upRes.once("end", () => decoding.decoders.length === 0 && resume(Effect.succeed({ status, up, down })))
      scrub.once("end", () => decoding.decoders.length > 0 && !cut && resume(Effect.succeed({ status, up, down })))
      // The answer cut at its budget ends for the box with the tap's last event; the upstream is just dropped.
      scrub.once("end", () => cut && resume(Effect.succeed({ status, up, down, note: "answer cut: over its budget" })))
      upRes.once("error", () => cut || resume(Effect.succeed({ status: 502, up, down, note: "upstream closed mid-answer" })))
    })
    upReq.once("error", (e) => {
      if (cut) return
      const refusal = e instanceof PooledRefusal ? e.refusal : new Refusal(502, e.message)
      refuseResponse(res, refusal)
      resume(Effect.succeed({ status: refusal.status, up, down, note: e.message, ...(e instanceof PooledRefusal ? { refusal } : {}) }))
    })
    if (o.checked) {
      up = o.checked.length
      o.onBody(o.checked)
      upReq.end(o.checked)
      return Effect.sync(() => upReq.destroy())
    }
    req.on("data", (c: Buffer) => {
      up += c.length
      o.onBody(c)
      if (up > o.limit) {
        upReq.destroy()
        req.unpipe(upReq)
        if (!res.headersSent) res.writeHead(413, { "content-type": "text/plain", connection: "close" }).end("roster gateway: request body too large\n")
        resume(Effect.succeed({ status: 413, up, down, note: "body over the limit" }))
      }
    })
    req.pipe(upReq)
    return Effect.sync(() => upReq.destroy())
  })

/**
 * A body that may be a model request, read whole and checked before anything leaves: refused
 * when it declares provider-side tools its grant does not allow; sent as re-serialised.
 */
const checkedBody = (req: http.IncomingMessage, grant: GrantRule, limit: number) =>
  Effect.gen(function*() {
    if (!isCheckedBody(req)) return undefined
    const raw = yield* readBody(req, limit)
    const parsed = parseChecked(req, raw)
    if (!parsed.ok) return yield* Effect.fail(new Refusal(400, "the request body is declared JSON and does not parse", { why: "malformed" }))
    if (parsed.json === undefined) return { body: raw, json: undefined }
    const vetted = vetServerTools(parsed.json, grant)
    if (!vetted.ok) return yield* Effect.fail(new Refusal(403, serverToolsReason(grant, vetted), { why: "server_tools" }))
    return { body: Buffer.from(JSON.stringify(parsed.json)), json: parsed.json }
  })

/** The model a request names (`model` in its JSON body). */
const modelOf = (json: unknown) => Option.getOrUndefined(decodeModel(json))?.model ?? "unknown"
const decodeModel = Schema.decodeUnknownOption(Schema.Struct({ model: Schema.String }))

/**
 * One request inside a terminated tunnel: re-authorised, the real credential in the one header
 * its kind uses, to the verified upstream (or the host's [[route]]), the answer scrubbed.
 */
export const injectForward = (target: Target, req: http.IncomingMessage, res: http.ServerResponse, trace: RequestTrace) =>
  Effect.gen(function*() {
    const self = yield* Gateway
    const refuseAs = refuseTraced(self.taints, trace, (r) => refuseResponse(res, r))
    const refuse = (r: Refusal) => refuseAs(r, target.caller)
    const granted = yield* grantedCredential(target).pipe(Effect.either)
    if (granted._tag === "Left") return yield* refuse(granted.left)
    const { authorized, credential, grant, upstream } = granted.right
    const limit = authorized.org.gateway.max_body_mib * 1024 * 1024
    const checkedOr = yield* checkedBody(req, grant, limit).pipe(Effect.either)
    if (checkedOr._tag === "Left") return yield* refuse(checkedOr.left)
    const checked = checkedOr.right
    // A run's model call is metered, and refused once a budget is used up.
    const { runId, worker } = target.caller
    const started = isModelCall(req) && runId && worker
      ? yield* startMeter({ ...target.caller, runId, worker }, authorized.org, modelOf(checked?.json))
      : undefined
    if (started?.refusal) return yield* refuse(started.refusal)
    const { headers, injected, reveals } = injectCredential(req.headers, credential.kind, credential.value)
    const out = forwardable(headers)
    if (checked) {
      out["content-length"] = String(checked.body.length)
      delete out["transfer-encoding"]
    }
    // The answer is scanned for the real value, so it must arrive uncompressed.
    out["accept-encoding"] = "identity"

    // A new connection is dialled, checked and verified as ever; an idle one of the same rule is reused.
    const open = openUpstream(authorized, upstream)
    const key = `${upstream.protocol}//${upstream.host}:${upstream.port} ${upstream.routed} ${JSON.stringify(grant)}`
    const agent = yield* self.upstreamPool.agentFor(key, open)
    const body = bodyScanner()
    if (checked) body.feed(checked.body)
    // Loud, never silent: a sentinel that goes out anywhere taints the run (before the answer, when
    // it is known before sending), is audited by place and warned to the run.
    const inHead = sentinelPlaces(out, req.url ?? "/", req.method)
    const before = [...inHead, ...(body.found() ? ["body"] : [])]
    const taintSentinel = (places: ReadonlyArray<string>) =>
      taintRun(self.taints, target.caller, "sentinel_upstream", target.host, `the placeholder went out in ${places.join(", ")}`)
    if (before.length > 0) yield* taintSentinel(before)
    const result = yield* relay(req, res, {
      out, agent, secrets: reveals, limit, onBody: checked ? () => {} : body.feed, checked: checked?.body, meter: started?.meter
    })
    if (started?.meter) yield* started.meter.finish
    const places = [...inHead, ...(body.found() ? ["body"] : [])]
    if (result.refusal) yield* taintOnRefusal(self.taints, target.caller, placed(result.refusal, trace))
    yield* auditTrace(trace, {
      status: result.status, injected, bytes_up: result.up, bytes_down: result.down, ...(result.note ? { note: result.note } : {}),
      ...(places.length > 0 ? { sentinel_unsubstituted: places } : {})
    })
    if (places.length > 0) {
      yield* warnRun(target.caller, sentinelWarning(target.host, places))
      if (before.length === 0) yield* taintSentinel(places)
    }
  })
