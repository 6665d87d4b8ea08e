import { FileSystem } from "@effect/platform"
import { Context, Effect, FiberSet, Layer, Schema } from "effect"
import * as http from "node:http"
import type * as net from "node:net"
import type { Duplex } from "node:stream"
import { OrgConfig } from "../config/OrgConfig.js"
import { Paths } from "../config/Paths.js"
import { LLM_PROVIDERS } from "../contract/constants.js"
import { isLoopback } from "../contract/addresses.js"
import { deploymentId } from "../contract/deployment.js"
import { PREFLIGHT_PATH } from "../contract/preflight.js"
import { credentialFor } from "../vault/credentialFor.js"
import { VERSION } from "../contract/version.js"
import { handleAction } from "./actions/actions.js"
import { ensureCa } from "./certs/ca.js"
import { handleConnect } from "./egress/connect.js"
import type { GatewayEnv } from "./base/env.js"
import { handleForward } from "./egress/forward.js"
import { Gateway, type GatewayContext, type GatewayState, makeGatewayState } from "./egress/Gateway.js"
import { makeLeafIssuer } from "./certs/leafCerts.js"
import { Refusal } from "./base/refusal.js"
import { refuseResponse, refuseSocket, refuseUnlessHttp1 } from "./base/refuse.js"
import { inBackground, newTrace, supervised } from "./base/supervise.js"
import { makeTerminator } from "./inject/terminate.js"

export class GatewayListenError extends Schema.TaggedError<GatewayListenError>()("GatewayListenError", {
  address: Schema.String,
  port: Schema.Number,
  detail: Schema.String
}) {
  override get message() {
    return `the gateway cannot listen on ${this.address}:${this.port} (${this.detail}) — ` +
      (this.detail.includes("EADDRNOTAVAIL")
        ? `${this.address} is not an address of this machine: name one that is (ip addr) in --addr or [gateway] listen, or leave them out`
        : `if another program holds the port, set [gateway] port in org.toml to a free one`)
  }
}

/**
 * `/healthz` on loopback: whose deployment this is, its version, and which connections have a
 * credential here and from where (never a value) — the daemon is the one owner of credentials, so
 * a CLI shapes a box's sentinels from this answer rather than from its own environment.
 */
const healthAnswer = (configRoot: string) =>
  Effect.gen(function*() {
    const org = yield* (yield* OrgConfig).snapshot.pipe(Effect.orElseSucceed(() => undefined))
    const names = new Set<string>([...LLM_PROVIDERS, ...(org?.grant.map((g) => g.credential) ?? [])])
    const credentials: Record<string, string> = {}
    for (const name of names) {
      const chosen = yield* credentialFor(name)
      if (chosen) credentials[name] = chosen.source
    }
    return { ok: true, config_root: configRoot, deployment_id: deploymentId(configRoot), version: VERSION, credentials }
  })

/** Where the gateway listens: every address (the host's loopback and each box network's gateway) on one port (0 picks one). */
export interface GatewayOptions {
  readonly addrs: ReadonlyArray<string>
  readonly port: number
}

/**
 * The gateway on every address, as a scoped layer of its `Gateway` service. Every request is a
 * fiber of this scope (a FiberSet) with the service provided: closing the scope interrupts
 * them and closes the listeners, open tunnels and upstream pools. Hosts with an injecting grant
 * are TLS-terminated (the CA in state/ca signs a leaf per host); [[allow]] hosts are tunnelled;
 * plain http:// absolute URIs are forwarded for [[allow]] only.
 */
export const GatewayLive = (options: GatewayOptions) => Layer.scoped(Gateway, makeGateway(options))

/** Starts the gateway in the caller's scope: the port it bound (the first address picks it when asked for 0) and its addresses. */
export const serveGateway = (options: GatewayOptions) =>
  Effect.map(Layer.build(GatewayLive(options)), (ctx) => {
    const gateway = Context.get(ctx, Gateway)
    return { port: gateway.port(), addrs: gateway.addrs }
  })

const makeGateway = Effect.fn("gateway.serve")(function*(options: GatewayOptions) {
  const run = yield* FiberSet.makeRuntime<GatewayEnv>()
  const runAwaited = yield* FiberSet.makeRuntimePromise<GatewayEnv>()
  const paths = yield* Paths
  const fs = yield* FileSystem.FileSystem
  const ca = yield* ensureCa()
  const issuer = yield* makeLeafIssuer(yield* fs.readFileString(ca.cert), yield* fs.readFileString(ca.key))
  const sockets = new Set<net.Socket>()
  let boundPort = options.port
  const self: GatewayState = yield* makeGatewayState(
    options.addrs,
    () => boundPort,
    (work) => void serve(inBackground(work)),
    (work) => runAwaited(Effect.provideService(work, Gateway, self))
  )
  const serve = (work: Effect.Effect<void, never, GatewayContext>) => run(Effect.provideService(work, Gateway, self))
  const { terminate } = yield* makeTerminator(issuer).pipe(Effect.provideService(Gateway, self))

  const onRequest = (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (refuseUnlessHttp1(req, req.socket)) return
    const target = req.url ?? ""
    if (req.method === "GET" && target === "/healthz") {
      // A box (any caller not on loopback) learns that the gateway is up and whose it is (an opaque
      // id its preflight checks), nothing of the host: no paths, no version, no credentials.
      if (!isLoopback(req.socket.remoteAddress)) {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ok: true, deployment_id: deploymentId(paths.config) }))
        return
      }
      serve(healthAnswer(paths.config).pipe(
        Effect.flatMap((body) => Effect.sync(() => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body))))
      ))
      return
    }
    if (target.startsWith("/") && !target.startsWith("/v1/actions/") && target !== PREFLIGHT_PATH) {
      res.writeHead(404, { "content-type": "text/plain" }).end("roster gateway: not found\n")
      return
    }
    serve(Effect.gen(function*() {
      const trace = yield* newTrace(req.method ?? "GET", target.startsWith("/") ? "roster-gateway" : "?", 0, target.split("?")[0] ?? "")
      const handler: Effect.Effect<void, never, GatewayContext> = target.startsWith("/") ? handleAction(req, res, trace) : handleForward(req, res, trace)
      yield* supervised(trace, handler, () => refuseResponse(res, new Refusal(500, "internal error")))
    }))
  }

  const onConnect = (req: http.IncomingMessage, socket: Duplex, head: Buffer) =>
    refuseUnlessHttp1(req, socket) || void serve(Effect.gen(function*() {
      const target = req.url ?? ""
      const trace = yield* newTrace("CONNECT", target.slice(0, 100), 0, "")
      yield* supervised(trace, handleConnect({ terminate, sockets }, req, socket, head, trace), () =>
        refuseSocket(socket, new Refusal(500, "internal error")))
    }))
  const servers: Array<http.Server> = []
  const listen = (address: string, port: number) =>
    Effect.async<number, GatewayListenError>((resume) => {
      const server = http.createServer({ maxHeaderSize: 16 * 1024, headersTimeout: 15_000, requestTimeout: 0 }, onRequest)
      server.on("connect", onConnect)
      server.on("connection", (socket: net.Socket) => {
        // A tunnel carries a terminated TLS conversation: Nagle would hold each answer's second
        // small write (headers, then body) for the box's delayed ACK — measured, 32 ms a request.
        socket.setNoDelay(true)
        sockets.add(socket)
        socket.once("close", () => sockets.delete(socket))
      })
      server.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex) => {
        refuseSocket(socket, new Refusal(err.code === "HPE_HEADER_OVERFLOW" ? 431 : 400, "bad request"))
      })
      server.once("error", (e: NodeJS.ErrnoException) =>
        resume(Effect.fail(new GatewayListenError({ address, port, detail: e.code ?? e.message }))))
      server.listen(port, address, () => {
        servers.push(server)
        const bound = server.address()
        resume(Effect.succeed(typeof bound === "object" && bound ? bound.port : port))
      })
    })

  yield* Effect.addFinalizer(() =>
    Effect.sync(() => {
      for (const s of servers) s.close()
      for (const s of sockets) s.destroy()
    })
  )
  for (const address of options.addrs) boundPort = yield* listen(address, boundPort)
  return self
})
