import { refuseTraced } from "../base/refuseTraced.js"
import { Effect } from "effect"
import * as http from "node:http"
import { isValidHost, normalizeHost } from "../../contract/addresses.js"
import { authorizeOrAsk, socketEnded } from "./approve.js"
import { dialChecked, namedBy } from "./authorize.js"
import { Gateway } from "./Gateway.js"
import { awaitPreflight } from "./preflightGate.js"
import { Refusal } from "../base/refusal.js"
import { forwardable, responsePairs } from "../base/headers.js"
import { identify, refusalStatus } from "../base/identify.js"
import { taintSentinel } from "../base/taint.js"
import { upstreamFor } from "../base/policy.js"
import { refuseResponse } from "../base/refuse.js"
import { sentinelWarning, warnRun } from "../base/runWarning.js"
import { bodyScanner, sentinelPlaces } from "../secrets/sentinelScan.js"
import { auditTrace, type RequestTrace } from "../base/supervise.js"

/** The request to the upstream on an already-dialled socket, streamed both ways; the answer's status and byte counts. */
const relay = (
  req: http.IncomingMessage,
  res: http.ServerResponse,
  url: URL,
  headers: http.OutgoingHttpHeaders,
  sock: import("node:net").Socket,
  onBody: (chunk: Buffer) => void
) =>
  Effect.async<{ status: number; up: number; down: number }>((resume) => {
    let up = 0
    let down = 0
    // The socket is already dialled to the checked address: no agent, no second lookup.
    const out = http.request({ method: req.method ?? "GET", path: `${url.pathname}${url.search}`, headers, createConnection: () => sock }, (upRes) => {
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
    req.on("data", (c: Buffer) => {
      up += c.length
      onBody(c)
    })
    req.pipe(out)
    return Effect.sync(() => out.destroy())
  })

/** A plain http:// absolute URI: forwarded for [[allow]] hosts only; credentials are injected only over TLS. */
export const handleForward = (req: http.IncomingMessage, res: http.ServerResponse, trace: RequestTrace) =>
  Effect.gen(function*() {
    const self = yield* Gateway
    let url: URL
    try {
      url = new URL(req.url ?? "")
    } catch {
      return refuseResponse(res, new Refusal(400, "malformed request target"))
    }
    trace.host = url.hostname
    trace.port = Number(url.port || 80)
    trace.path = url.pathname
    // A refusal of egress taints the caller's run (known once the token is read).
    const refuse = refuseTraced(self.taints, trace, (r) => refuseResponse(res, r))
    const who = yield* identify(req.headers, req.socket.remoteAddress, self.identities)
    if (!who.ok) return yield* refuse(new Refusal(refusalStatus(who.why), who.reason, { why: who.why }))
    trace.run_id = who.caller.runId
    trace.subject = who.caller.subject
    if (url.protocol !== "http:" || url.username || url.password || !isValidHost(normalizeHost(url.hostname))) {
      return yield* refuse(new Refusal(400, "only plain http:// absolute URIs without userinfo (use CONNECT for https)"), who.caller)
    }
    const held = yield* awaitPreflight(who.caller).pipe(Effect.either)
    if (held._tag === "Left") return yield* refuse(held.left, who.caller)
    const ok = yield* authorizeOrAsk(who.caller, url.hostname, trace.port, { method: req.method ?? "GET", path: url.pathname }, socketEnded(req.socket)).pipe(Effect.either)
    if (ok._tag === "Left") return yield* refuse(ok.left, who.caller)
    trace.host = ok.right.host
    if (ok.right.decision.via === "grant") {
      return yield* refuse(new Refusal(403, "credentials are injected only over TLS: use https://", { why: "tls_only" }), who.caller)
    }
    const to = upstreamFor(ok.right.org, ok.right.host, ok.right.port, "http:")
    const dialled = yield* dialChecked(to.host, to.port, to.routed ? () => true : namedBy(ok.right)).pipe(Effect.either)
    if (dialled._tag === "Left") return yield* refuse(dialled.left, who.caller)
    const headers = forwardable(req.headers)
    headers.host = url.host
    const body = bodyScanner()
    const sentinelOut = (places: ReadonlyArray<string>) => taintSentinel(self.taints, who.caller, trace.host, places)
    // Known before sending (headers, query): the run is tainted before the box hears the answer.
    const before = sentinelPlaces(headers, `${url.pathname}${url.search}`, req.method)
    if (before.length > 0) yield* sentinelOut(before)
    const counts = yield* relay(req, res, url, headers, dialled.right.socket, body.feed)
    const places = [...before, ...(body.found() ? ["body"] : [])]
    yield* auditTrace(trace, {
      status: counts.status, bytes_up: counts.up, bytes_down: counts.down, ...(places.length > 0 ? { sentinel_unsubstituted: places } : {}),
      ...(ok.right.approvedBy ? { note: `approved by ${ok.right.approvedBy}` } : {})
    })
    if (places.length > 0) {
      yield* warnRun(who.caller, sentinelWarning(trace.host, places))
      if (before.length === 0) yield* sentinelOut(places)
    }
  })
