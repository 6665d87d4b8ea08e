import { Effect } from "effect"
import * as http from "node:http"
import { isValidHost, normalizeHost } from "../../contract/addresses.js"
import { socketEnded } from "./approve.js"
import { callerOf } from "./caller.js"
import { answeringRefusals, approvedNote, decideNow, settle } from "./decision.js"
import { dialChecked } from "./dial.js"
import { Gateway } from "./Gateway.js"
import { awaitPreflight } from "./preflightGate.js"
import { Refusal } from "../base/refusal.js"
import { forwardable, responsePairs } from "../base/headers.js"
import { taintSentinelAfter, taintSentinelBefore } from "../base/taint.js"
import { readBody } from "../base/requestBody.js"
import { type AskedRequest, headsOf, pathAsWritten } from "../policy/asked.js"
import { refuseResponse } from "../base/refuse.js"
import { sentinelWarning, warnRun } from "../base/runWarning.js"
import { bodyScanner, sentinelPlaces } from "../secrets/sentinelScan.js"
import { upstreamTls } from "../upstream/upstreamTls.js"
import { auditTrace, type RequestTrace } from "../base/supervise.js"

/**
 * The request to the upstream on an already-dialled socket, streamed both ways (or, read already to be
 * decided, its `raw` body sent as read); the answer's status and byte counts.
 */
const relay = (
  req: http.IncomingMessage,
  res: http.ServerResponse,
  path: string,
  headers: http.OutgoingHttpHeaders,
  sock: import("node:net").Socket,
  body: { readonly onBody: (chunk: Buffer) => void } | { readonly raw: Buffer }
) =>
  Effect.async<{ status: number; up: number; down: number }>((resume) => {
    let up = 0
    let down = 0
    // The socket is already dialled to the checked address: no agent, no second lookup.
    const out = http.request({ method: req.method ?? "GET", path, headers, createConnection: () => sock }, (upRes) => {
      // A redirect goes back to the box as it came: the gateway never follows one.
      res.writeHead(upRes.statusCode ?? 502, responsePairs(upRes.rawHeaders))
      upRes.on("data", (c: Buffer) => (down += c.length))
      upRes.pipe(res)
      upRes.once("end", () => resume(Effect.succeed({ status: upRes.statusCode ?? 502, up, down })))
    })
    out.once("error", (e) => {
      refuseResponse(res, new Refusal(502, e.message))
      resume(Effect.succeed({ status: 502, up, down }))
    })
    if ("raw" in body) {
      up = body.raw.length
      out.end(body.raw)
    } else {
      req.on("data", (c: Buffer) => {
        up += c.length
        body.onBody(c)
      })
      req.pipe(out)
    }
    return Effect.sync(() => out.destroy())
  })

/** A plain http:// absolute URI: decided as any request (an [[allow]]'s rules on its canonical path); a [[grant]]'s credential goes only over TLS. */
export const handleForward = (req: http.IncomingMessage, res: http.ServerResponse, trace: RequestTrace) =>
  Effect.gen(function*() {
    const self = yield* Gateway
    let url: URL
    try {
      url = new URL(req.url ?? "")
    } catch {
      return yield* new Refusal(400, "malformed request target")
    }
    trace.host = url.hostname
    trace.port = Number(url.port || 80)
    trace.path = url.pathname
    const caller = yield* callerOf(req, trace)
    if (url.protocol !== "http:" || url.username || url.password || !isValidHost(normalizeHost(url.hostname))) {
      return yield* new Refusal(400, "only plain http:// absolute URIs without userinfo (use CONNECT for https)")
    }
    yield* awaitPreflight(caller)
    const asked: AskedRequest = {
      _tag: "Request", via: "plain", host: url.hostname, port: trace.port, method: req.method ?? "GET", target: pathAsWritten(req.url ?? ""),
      heads: headsOf(req.headers), upgrade: req.headers.upgrade !== undefined
    }
    const { policy, verdict } = yield* decideNow(caller, asked)
    const { approvedBy, settled } = yield* settle(policy, asked, verdict, { caller, readBody: (limit) => readBody(req, limit), closed: socketEnded(req.socket) })
    if (settled._tag !== "Forward") return yield* Effect.dieMessage(`a plain request was decided as a ${settled._tag}`)
    trace.host = settled.host
    trace.path = settled.url.split("?")[0] ?? "/"
    // A [[route]] names its upstream's scheme too: a plain request routed to https:// goes over verified TLS.
    const dialled = yield* dialChecked(settled.dial)
    const socket = settled.dial.protocol === "https:"
      ? yield* upstreamTls(dialled.socket, settled.dial.host, yield* self.upstreamTrust(policy.org.gateway.upstream_ca_file))
      : dialled.socket
    const headers = forwardable(req.headers)
    headers.host = url.host
    const raw = settled.body?.raw
    if (raw) {
      headers["content-length"] = String(raw.length)
      delete headers["transfer-encoding"]
      if (settled.body?.decoded) delete headers["content-encoding"]
    }
    const body = bodyScanner()
    // Known before sending (headers, query): the run is tainted before the box hears the answer.
    const before = sentinelPlaces(headers, settled.url, req.method)
    if (raw) body.feed(raw)
    if (body.found()) before.push("body")
    if (before.length > 0) yield* taintSentinelBefore(self.taints, caller, trace.host, before)
    const counts = yield* relay(req, res, settled.url, headers, socket, raw ? { raw } : { onBody: body.feed })
    const places = [...before, ...(body.found() && !before.includes("body") ? ["body"] : [])]
    yield* auditTrace(trace, {
      status: counts.status, bytes_up: counts.up, bytes_down: counts.down, ...(places.length > 0 ? { sentinel_unsubstituted: places } : {}),
      ...(approvedBy ? { note: approvedNote(approvedBy) } : {}), ...(settled.by ? { decided_by: `${settled.entry} ${settled.by}` } : {})
    })
    if (places.length > 0) {
      yield* warnRun(caller, sentinelWarning(trace.host, places))
      if (before.length === 0) yield* taintSentinelAfter(self.taints, caller, trace.host, places)
    }
  }).pipe(answeringRefusals(trace, (r) => refuseResponse(res, r)))
