import { FileSystem } from "@effect/platform"
import { Effect, Runtime, Schema } from "effect"
import * as http from "node:http"
import type * as net from "node:net"
import type { Duplex } from "node:stream"
import { Paths } from "../config/Paths.js"
import { VERSION } from "../version.js"
import { isValidHost, normalizeHost } from "./addresses.js"
import { handleAction } from "./actions.js"
import { audit, type AuditRecord } from "./audit.js"
import { authorize, dialChecked, namedBy, type Refusal, type Self } from "./authorize.js"
import { ensureCa } from "./ca.js"
import type { GatewayEnv } from "./env.js"
import { forwardable, responsePairs } from "./headers.js"
import { identify } from "./identify.js"
import { makeLeafIssuer } from "./leafCerts.js"
import { upstreamFor } from "./policy.js"
import { makeTerminator } from "./terminate.js"

export class GatewayListenError extends Schema.TaggedError<GatewayListenError>()("GatewayListenError", {
  address: Schema.String,
  port: Schema.Number,
  detail: Schema.String
}) {
  override get message() {
    return `the gateway cannot listen on ${this.address}:${this.port} (${this.detail}) — ` +
      `if another program holds the port, set [gateway] port in org.toml to a free one`
  }
}

export interface GatewayOptions {
  readonly addrs: ReadonlyArray<string>
  readonly port: number
}

const STATUS_TEXT: Record<number, string> = {
  400: "Bad Request", 403: "Forbidden", 404: "Not Found", 407: "Proxy Authentication Required",
  431: "Request Header Fields Too Large", 502: "Bad Gateway"
}

/** A refusal on a raw socket (CONNECT, client errors): a complete response, then close. */
const refuseSocket = (socket: Duplex, status: number, reason: string) => {
  if (!socket.writable) return socket.destroy()
  const body = `${reason}\n`
  const extra = status === 407 ? `Proxy-Authenticate: Basic realm="roster"\r\n` : ""
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? "Error"}\r\n${extra}Content-Type: text/plain\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  )
}

/**
 * Starts the gateway on every address; the scope closes the listeners and open tunnels. Hosts
 * with an injecting grant are TLS-terminated (the CA in state/ca signs a leaf per host);
 * [[allow]] hosts are tunnelled; plain http:// absolute URIs are forwarded for [[allow]] only.
 */
export const serveGateway = Effect.fn("gateway.serve")(function*(options: GatewayOptions) {
  const runtime = yield* Effect.runtime<GatewayEnv>()
  const run = Runtime.runFork(runtime)
  const paths = yield* Paths
  const fs = yield* FileSystem.FileSystem
  const ca = yield* ensureCa()
  const issuer = yield* makeLeafIssuer(yield* fs.readFileString(ca.cert), yield* fs.readFileString(ca.key))
  const sockets = new Set<net.Socket>()
  let boundPort = options.port
  const self: Self = { port: () => boundPort, addrs: options.addrs }
  const { terminate } = yield* makeTerminator(self, issuer)

  const record = (partial: Omit<AuditRecord, "duration_ms">, startedAt: number) =>
    audit({ ...partial, duration_ms: Date.now() - startedAt })

  const handleConnect = (req: http.IncomingMessage, client: Duplex, head: Buffer) =>
    Effect.gen(function*() {
      const startedAt = Date.now()
      const target = req.url ?? ""
      const m = /^\[?([^\]]*?)\]?:(\d{1,5})$/.exec(target)
      const base = { run_id: null, subject: "?", host: m?.[1] ?? target.slice(0, 100), port: Number(m?.[2] ?? 0), method: "CONNECT", path: "", injected: false }
      const who = yield* identify(req.headers, req.socket.remoteAddress)
      if (!who.ok) {
        refuseSocket(client, 407, `roster gateway: ${who.reason}`)
        return yield* record({ ...base, status: 407, bytes_up: 0, bytes_down: 0, note: who.reason }, startedAt)
      }
      const caller = who.caller
      const withCaller = { ...base, run_id: caller.runId, subject: caller.subject }
      const refuse = (r: Refusal) =>
        Effect.sync(() => refuseSocket(client, r.status, `roster gateway: ${r.reason}`)).pipe(
          Effect.zipRight(record({ ...withCaller, status: r.status, bytes_up: 0, bytes_down: 0, note: r.reason }, startedAt))
        )
      if (!m) return yield* refuse({ _tag: "Refusal", status: 400, reason: "CONNECT wants host:port" })
      const ok = yield* authorize(caller, m[1] ?? "", Number(m[2])).pipe(Effect.either)
      if (ok._tag === "Left") return yield* refuse(ok.left)
      if (ok.right.decision.via === "grant") {
        // Each request inside is audited on its own; the CONNECT itself is not a request upstream.
        return yield* terminate(client, head, caller, ok.right.host, ok.right.port).pipe(
          Effect.catchAll((e) => refuse({ _tag: "Refusal", status: 502, reason: `cannot present a certificate for ${e.host}` }))
        )
      }
      const to = upstreamFor(ok.right.org, ok.right.host, ok.right.port, "https:")
      const dialled = yield* dialChecked(self, to.host, to.port, to.routed ? () => true : namedBy(ok.right)).pipe(Effect.either)
      if (dialled._tag === "Left") return yield* refuse(dialled.left)
      const up = dialled.right.socket
      sockets.add(up)
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n")
      if (head.length > 0) up.write(head)
      let bytesUp = head.length
      let bytesDown = 0
      client.on("data", (c: Buffer) => (bytesUp += c.length))
      up.on("data", (c: Buffer) => (bytesDown += c.length))
      client.pipe(up)
      up.pipe(client)
      yield* Effect.async<void>((resume) => {
        let open = 2
        const done = () => {
          if (--open === 0) resume(Effect.void)
        }
        const closeBoth = () => {
          client.destroy()
          up.destroy()
        }
        client.once("close", done)
        up.once("close", done)
        client.once("error", closeBoth)
        up.once("error", closeBoth)
        return Effect.sync(closeBoth)
      })
      sockets.delete(up)
      yield* record({ ...withCaller, host: ok.right.host, status: 200, bytes_up: bytesUp, bytes_down: bytesDown }, startedAt)
    })

  const handleForward = (req: http.IncomingMessage, res: http.ServerResponse) =>
    Effect.gen(function*() {
      const startedAt = Date.now()
      const method = req.method ?? "GET"
      let url: URL
      try {
        url = new URL(req.url ?? "")
      } catch {
        res.writeHead(400).end("roster gateway: malformed request target\n")
        return
      }
      const base = { run_id: null, subject: "?", host: url.hostname, port: Number(url.port || 80), method, path: url.pathname, injected: false }
      const who = yield* identify(req.headers, req.socket.remoteAddress)
      if (!who.ok) {
        res.writeHead(407, { "proxy-authenticate": `Basic realm="roster"` }).end(`roster gateway: ${who.reason}\n`)
        return yield* record({ ...base, status: 407, bytes_up: 0, bytes_down: 0, note: who.reason }, startedAt)
      }
      const withCaller = { ...base, run_id: who.caller.runId, subject: who.caller.subject }
      const refuse = (r: Refusal) =>
        Effect.sync(() => res.writeHead(r.status, { "content-type": "text/plain" }).end(`roster gateway: ${r.reason}\n`)).pipe(
          Effect.zipRight(record({ ...withCaller, status: r.status, bytes_up: 0, bytes_down: 0, note: r.reason }, startedAt))
        )
      if (url.protocol !== "http:" || url.username || url.password || !isValidHost(normalizeHost(url.hostname))) {
        return yield* refuse({ _tag: "Refusal", status: 400, reason: "only plain http:// absolute URIs without userinfo (use CONNECT for https)" })
      }
      const ok = yield* authorize(who.caller, url.hostname, base.port).pipe(Effect.either)
      if (ok._tag === "Left") return yield* refuse(ok.left)
      if (ok.right.decision.via === "grant") {
        return yield* refuse({ _tag: "Refusal", status: 403, reason: "credentials are injected only over TLS: use https://" })
      }
      const to = upstreamFor(ok.right.org, ok.right.host, ok.right.port, "http:")
      const dialled = yield* dialChecked(self, to.host, to.port, to.routed ? () => true : namedBy(ok.right)).pipe(Effect.either)
      if (dialled._tag === "Left") return yield* refuse(dialled.left)
      const headers = forwardable(req.headers)
      headers.host = url.host
      const sock = dialled.right.socket
      const counts = yield* Effect.async<{ status: number; up: number; down: number }>((resume) => {
        let up = 0
        let down = 0
        // The socket is already dialled to the checked address: no agent, no second lookup.
        const out = http.request({ method, path: `${url.pathname}${url.search}`, headers, createConnection: () => sock }, (upRes) => {
          // A redirect goes back to the box as it came: the gateway never follows one.
          res.writeHead(upRes.statusCode ?? 502, responsePairs(upRes.rawHeaders))
          upRes.on("data", (c: Buffer) => (down += c.length))
          upRes.pipe(res)
          upRes.once("end", () => resume(Effect.succeed({ status: upRes.statusCode ?? 502, up, down })))
        })
        out.once("error", (e) => {
          if (!res.headersSent) res.writeHead(502).end(`roster gateway: ${e.message}\n`)
          else res.destroy()
          resume(Effect.succeed({ status: 502, up, down }))
        })
        req.on("data", (c: Buffer) => (up += c.length))
        req.pipe(out)
        return Effect.sync(() => out.destroy())
      })
      yield* record({ ...withCaller, host: ok.right.host, status: counts.status, bytes_up: counts.up, bytes_down: counts.down }, startedAt)
    })

  const onRequest = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const target = req.url ?? ""
    if (target.startsWith("/")) {
      if (target.startsWith("/v1/actions/")) {
        run(handleAction(req, res).pipe(Effect.catchAllCause(() => Effect.sync(() => res.destroy()))))
      } else if (req.method === "GET" && target === "/healthz") {
        res.writeHead(200, { "content-type": "application/json" })
          .end(JSON.stringify({ ok: true, config_root: paths.config, version: VERSION }))
      } else {
        res.writeHead(404, { "content-type": "text/plain" }).end("roster gateway: not found\n")
      }
      return
    }
    run(handleForward(req, res).pipe(Effect.catchAllCause(() => Effect.sync(() => res.destroy()))))
  }

  const servers: Array<http.Server> = []
  const listen = (address: string, port: number) =>
    Effect.async<number, GatewayListenError>((resume) => {
      const server = http.createServer({ maxHeaderSize: 16 * 1024, headersTimeout: 15_000, requestTimeout: 0 }, onRequest)
      server.on("connect", (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
        run(handleConnect(req, socket, head).pipe(Effect.catchAllCause(() => Effect.sync(() => socket.destroy()))))
      })
      server.on("connection", (socket: net.Socket) => {
        sockets.add(socket)
        socket.once("close", () => sockets.delete(socket))
      })
      server.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex) => {
        refuseSocket(socket, err.code === "HPE_HEADER_OVERFLOW" ? 431 : 400, "roster gateway: bad request")
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
  return { port: boundPort, addrs: options.addrs }
})
