import { Effect, FiberSet } from "effect"
import * as http from "node:http"
import type * as net from "node:net"
import type { Duplex } from "node:stream"
import * as tls from "node:tls"
import type { Caller } from "../base/identify.js"
import type { Target } from "./granted.js"
import { injectForward } from "./injectForward.js"
import { injectUpgrade } from "./injectUpgrade.js"
import { makeFastForward } from "./fastForward.js"
import { makeGrantCache, openGrant } from "./grantCache.js"
import type { LeafIssuer } from "../certs/leafCerts.js"
import { Refusal } from "../base/refusal.js"
import { refuseResponse, refuseSocket, refuseUnlessHttp1 } from "../base/refuse.js"
import { newTrace, type RequestTrace, supervised } from "../base/supervise.js"
import type { GatewayContext } from "../egress/Gateway.js"

/** The trace of a request inside a tunnel: its caller is the tunnel's. */
const noteCaller = (trace: RequestTrace, target: Target) => {
  trace.run_id = target.caller.runId
  trace.subject = target.caller.subject
  trace.caller = target.caller
}

/**
 * TLS termination for hosts with an injecting grant: the box gets a leaf certificate for the
 * host from the roster CA, and each request inside goes through `injectForward` (a WebSocket
 * upgrade through `injectUpgrade`) as a supervised fiber of the gateway's scope — or, the common
 * request on a connection granted a moment ago, through `fastForward` without one. Each decides the
 * request with the one decision (gateway/policy/decide.ts) and acts on its verdict.
 */
export const makeTerminator = Effect.fn("gateway.makeTerminator")(function*(issuer: LeafIssuer) {
  const run = yield* FiberSet.makeRuntime<GatewayContext>()
  const targets = new WeakMap<object, Target>()

  // What each connection was last granted, for its next requests.
  const grants = makeGrantCache()
  // The slow way for a request the fast path read the body of and then found was not its to send.
  const slow = (target: Target, req: http.IncomingMessage, res: http.ServerResponse, read: Buffer) =>
    void run(Effect.gen(function*() {
      const trace = yield* newTrace(req.method ?? "GET", target.host, target.port, (req.url ?? "/").split("?")[0] ?? "/")
      noteCaller(trace, target)
      yield* supervised(trace, injectForward(target, req, res, trace, grants, read), () => refuseResponse(res, new Refusal(500, "internal error")))
    }))
  const fast = yield* makeFastForward(grants, slow)

  const onRequest = (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (refuseUnlessHttp1(req, req.socket)) return
    const target = targets.get(req.socket)
    // The common request without a fiber; the rest (and the first of each connection) as an Effect.
    if (target && fast.tryForward(target, req, res)) return
    void run(Effect.gen(function*() {
      const trace = yield* newTrace(req.method ?? "GET", target?.host ?? "?", target?.port ?? 0, (req.url ?? "/").split("?")[0] ?? "/")
      if (!target) return refuseResponse(res, new Refusal(400, "bad request"))
      noteCaller(trace, target)
      yield* supervised(trace, injectForward(target, req, res, trace, grants), () => refuseResponse(res, new Refusal(500, "internal error")))
    }))
  }

  // A WebSocket handshake: the same decision, then frames both ways (injectUpgrade).
  const onUpgrade = (req: http.IncomingMessage, socket: Duplex, head: Buffer) =>
    refuseUnlessHttp1(req, socket) || void run(Effect.gen(function*() {
      const target = targets.get(req.socket)
      const trace = yield* newTrace(req.method ?? "GET", target?.host ?? "?", target?.port ?? 0, (req.url ?? "/").split("?")[0] ?? "/")
      if (!target || req.method !== "GET") return refuseSocket(socket, new Refusal(400, "bad request"))
      noteCaller(trace, target)
      yield* supervised(trace, injectUpgrade(target, req, socket, head, trace, grants), () => socket.destroy())
    }))

  const inner = http.createServer({ maxHeaderSize: 16 * 1024, headersTimeout: 15_000, requestTimeout: 0, keepAliveTimeout: 60_000 }, onRequest)
  inner.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex) => {
    const status = err.code === "HPE_HEADER_OVERFLOW" ? 431 : 400
    if (socket.writable) socket.end(`HTTP/1.1 ${status} Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`)
    else socket.destroy()
  })
  inner.on("upgrade", onUpgrade)
  yield* Effect.addFinalizer(() => Effect.sync(() => inner.close()))

  /** Answers the CONNECT, then speaks TLS as `host` on the box's side of the tunnel. */
  const terminate = (client: Duplex, head: Buffer, caller: Caller, host: string, port: number) =>
    Effect.gen(function*() {
      const context = yield* issuer.contextFor(host)
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n")
      if (head.length > 0) client.unshift(head)
      const secured = new tls.TLSSocket(client as net.Socket, { isServer: true, secureContext: context, ALPNProtocols: ["http/1.1"] })
      secured.on("error", () => secured.destroy())
      const target: Target = { caller, host, port }
      targets.set(secured, target)
      inner.emit("connection", secured)
      void run(openGrant(target, grants))
    })

  return { terminate }
})
