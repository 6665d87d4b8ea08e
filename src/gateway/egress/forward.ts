import { refuseTraced } from "../base/refuseTraced.js"
import { Effect } from "effect"
import * as http from "node:http"
import { isValidHost, normalizeHost } from "../../contract/addresses.js"
import { authorizeOrAsk, socketEnded } from "./approve.js"
import { type Authorized, dialChecked, namedBy } from "./authorize.js"
import { Gateway } from "./Gateway.js"
import { awaitPreflight } from "./preflightGate.js"
import { Refusal } from "../base/refusal.js"
import { forwardable, responsePairs } from "../base/headers.js"
import { type Caller, identify, refusalStatus } from "../base/identify.js"
import { taintSentinel } from "../base/taint.js"
import { upstreamFor } from "../base/policy.js"
import { pathAsWritten } from "../base/canonicalPath.js"
import { bodyLimit } from "../base/requestBody.js"
import { hasRules } from "../base/requestRules.js"
import { approvedNote, byRules } from "./byRules.js"
import { refuseResponse } from "../base/refuse.js"
import { sentinelWarning, warnRun } from "../base/runWarning.js"
import { bodyScanner, sentinelPlaces } from "../secrets/sentinelScan.js"
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

/**
 * What an [[allow]] with request rules makes of a plain request: decided by its method and canonical
 * path (and body, where a rule reads it, which is then the body sent); without rules, the path as sent.
 */
const forwardRules = (caller: Caller, ok: Authorized & { readonly approvedBy?: string }, req: http.IncomingMessage, url: URL) =>
  Effect.gen(function*() {
    const plain = { path: `${url.pathname}${url.search}`, raw: undefined as Buffer | undefined, approvedBy: ok.approvedBy }
    if (!hasRules(ok.decision.rule)) return plain
    const ruled = yield* byRules({ caller, host: ok.host, port: ok.port }, req, pathAsWritten(req.url ?? ""), ok.decision.rule, bodyLimit(ok.org))
    return { path: req.url ?? "/", raw: ruled.raw, approvedBy: ruled.approvedBy ?? ok.approvedBy }
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
    const ruled = yield* forwardRules(who.caller, ok.right, req, url).pipe(Effect.either)
    if (ruled._tag === "Left") return yield* refuse(ruled.left, who.caller)
    const { approvedBy, path, raw } = ruled.right
    trace.path = path.split("?")[0] ?? "/"
    const to = upstreamFor(ok.right.org, ok.right.host, ok.right.port, "http:")
    const dialled = yield* dialChecked(to.host, to.port, to.routed ? () => true : namedBy(ok.right)).pipe(Effect.either)
    if (dialled._tag === "Left") return yield* refuse(dialled.left, who.caller)
    const headers = forwardable(req.headers)
    headers.host = url.host
    if (raw) {
      headers["content-length"] = String(raw.length)
      delete headers["transfer-encoding"]
    }
    const body = bodyScanner()
    const sentinelOut = (places: ReadonlyArray<string>) => taintSentinel(self.taints, who.caller, trace.host, places)
    // Known before sending (headers, query): the run is tainted before the box hears the answer.
    const before = sentinelPlaces(headers, path, req.method)
    if (raw) body.feed(raw)
    if (body.found()) before.push("body")
    if (before.length > 0) yield* sentinelOut(before)
    const counts = yield* relay(req, res, path, headers, dialled.right.socket, raw ? { raw } : { onBody: body.feed })
    const places = [...before, ...(body.found() && !before.includes("body") ? ["body"] : [])]
    yield* auditTrace(trace, {
      status: counts.status, bytes_up: counts.up, bytes_down: counts.down, ...(places.length > 0 ? { sentinel_unsubstituted: places } : {}),
      ...(approvedBy ? { note: approvedNote(approvedBy) } : {})
    })
    if (places.length > 0) {
      yield* warnRun(who.caller, sentinelWarning(trace.host, places))
      if (before.length === 0) yield* sentinelOut(places)
    }
  })
