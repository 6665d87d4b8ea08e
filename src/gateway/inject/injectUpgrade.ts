import { Effect } from "effect"
import * as http from "node:http"
import type { Duplex } from "node:stream"
import { SENTINEL } from "../../contract/constants.js"
import { forwardable, responsePairs } from "../base/headers.js"
import { Refusal } from "../base/refusal.js"
import { refuseSocket } from "../base/refuse.js"
import { sentinelWarning, warnRun } from "../base/runWarning.js"
import { auditTrace, type RequestTrace } from "../base/supervise.js"
import { taintSentinelBefore } from "../base/taint.js"
import { Gateway } from "../egress/Gateway.js"
import { socketEnded } from "../egress/approve.js"
import { answeringRefusals, approvedNote, settle } from "../egress/decision.js"
import { bodyLimitOf, decide } from "../policy/decide.js"
import { Scrub, scrubText } from "../secrets/scrub.js"
import { sentinelPlaces } from "../secrets/sentinelScan.js"
import { type GrantCache, grantFor } from "./grantCache.js"
import { askedIn, injectGranted, openUpstream, type Target } from "./granted.js"
import { relayWebSocket } from "./wsRelay.js"

type Handshake =
  | { readonly _tag: "Upgraded"; readonly res: http.IncomingMessage; readonly socket: Duplex; readonly head: Buffer }
  | { readonly _tag: "Answered"; readonly res: http.IncomingMessage }

/** The handshake sent on its own connection: the upstream switches protocols, or answers as HTTP. */
const handshake = (connection: Duplex, path: string, headers: http.OutgoingHttpHeaders) =>
  Effect.async<Handshake, Refusal>((resume) => {
    const req = http.request({ method: "GET", path, headers, createConnection: () => connection as never })
    req.once("upgrade", (res, socket, head) => resume(Effect.succeed({ _tag: "Upgraded", res, socket, head })))
    req.once("response", (res) => resume(Effect.succeed({ _tag: "Answered", res })))
    req.once("error", (e) => resume(Effect.fail(new Refusal(502, `the upstream's WebSocket handshake failed: ${e.message}`, { why: "upstream" }))))
    req.end()
    return Effect.sync(() => req.destroy())
  })

const head = (status: number, text: string, pairs: ReadonlyArray<string>) => {
  let out = `HTTP/1.1 ${status} ${text}\r\n`
  for (let i = 0; i + 1 < pairs.length; i += 2) out += `${pairs[i]}: ${pairs[i + 1]}\r\n`
  return `${out}\r\n`
}

/** An upstream that did not switch: its answer to the box, scrubbed, on a connection that then closes. */
const relayAnswer = (box: Duplex, res: http.IncomingMessage, secrets: ReadonlyArray<string>) =>
  Effect.async<number>((resume) => {
    const pairs = responsePairs(res.rawHeaders, new Set(["content-length", "content-encoding"]), (v) => scrubText(v, secrets, SENTINEL))
    box.write(head(res.statusCode ?? 502, res.statusMessage ?? "", [...pairs, "Connection", "close"]))
    res.pipe(new Scrub(secrets, Buffer.from(SENTINEL))).pipe(box)
    res.once("end", () => resume(Effect.succeed(res.statusCode ?? 502)))
    res.once("error", () => resume(Effect.succeed(502)))
    return Effect.sync(() => res.destroy())
  })

/**
 * A WebSocket upgrade inside a terminated tunnel: decided by the connection's policy as any request (an
 * entry with rules lets one through only where a websocket = true rule names it), the credential injected
 * in the handshake as in any request (none on an intercepted [[allow]]), and `Sec-WebSocket-Extensions`
 * removed so no frame comes compressed past the scrubber. After the switch the frames are relayed both
 * ways: the upstream's scrubbed of the credential, the box's read as frames (anything else cuts the
 * connection) and watched for the sentinel (a sentinel sent taints the run and is audited, as in a
 * request). Budgets do not meter WebSocket traffic.
 */
export const injectUpgrade = (
  target: Target,
  req: http.IncomingMessage,
  box: Duplex,
  boxHead: Buffer,
  trace: RequestTrace,
  grants: GrantCache
) =>
  Effect.gen(function*() {
    const self = yield* Gateway
    // The same grant as the connection's other requests: the one decided as its tunnel opened, when fresh.
    const { granted: { credential, policy } } = yield* grantFor(target, grants)
    const asked = askedIn(target, req, true)
    const { approvedBy, settled } = yield* settle(policy, asked, decide(policy, target.caller, asked), {
      caller: target.caller, readBody: () => Effect.succeed(Buffer.alloc(0)), closed: socketEnded(box)
    })
    if (settled._tag !== "Forward") return yield* Effect.dieMessage(`a WebSocket handshake was decided as a ${settled._tag}`)
    trace.path = settled.url.split("?")[0] ?? "/"
    const { headers, injected, reveals } = injectGranted(req.headers, credential)
    const out = forwardable(headers)
    delete out["sec-websocket-extensions"]
    out.connection = "Upgrade"
    out.upgrade = "websocket"
    const places = sentinelPlaces(out, settled.url, req.method)
    const sentinelOut = (where: ReadonlyArray<string>) =>
      taintSentinelBefore(self.taints, target.caller, target.host, where).pipe(
        Effect.zipRight(warnRun(target.caller, sentinelWarning(target.host, where)))
      )
    if (places.length > 0) yield* sentinelOut(places)
    const connection = yield* openUpstream(settled.dial, policy.org.gateway.upstream_ca_file)
    const answer = yield* handshake(connection, settled.url, out)
    const noted = (note: string) => (approvedBy ? approvedNote(approvedBy, note) : note)
    const decided = settled.by ? { decided_by: `${settled.entry} ${settled.by}` } : {}
    if (answer._tag === "Answered") {
      const status = yield* relayAnswer(box, answer.res, reveals)
      return yield* auditTrace(trace, { status, injected, note: noted("websocket handshake answered without switching"), ...decided })
    }
    if (answer.res.headers["sec-websocket-extensions"]) {
      answer.socket.destroy()
      return yield* new Refusal(502, "the upstream negotiated a WebSocket extension (compression) roster cannot scrub", { why: "encoding" })
    }
    box.write(head(101, "Switching Protocols", responsePairs(answer.res.rawHeaders, new Set(), (v) => scrubText(v, reveals, SENTINEL)).concat(
      "Upgrade", "websocket", "Connection", "Upgrade"
    )))
    const sentFrames: Array<string> = []
    const relayed = yield* relayWebSocket(box, answer.socket, boxHead, answer.head, {
      secrets: reveals,
      maxFrame: bodyLimitOf(policy),
      onSentinel: (done) => {
        sentFrames.push("websocket frame")
        // In the gateway's scope: the taint is written (and the frame let go) even if this connection ends first;
        // a taint that cannot be written cuts the connection instead of letting the frame go.
        self.runPromise(Effect.either(sentinelOut(sentFrames))).then((e) => done(e._tag === "Right"), () => done(false))
      }
    })
    const sentinel = [...places, ...sentFrames]
    yield* auditTrace(trace, {
      status: 101, injected, bytes_up: relayed.up, bytes_down: relayed.down, note: noted(relayed.note ?? "websocket"), ...decided,
      ...(sentinel.length > 0 ? { sentinel_unsubstituted: sentinel } : {})
    })
  }).pipe(answeringRefusals(trace, (r) => refuseSocket(box, r)))
