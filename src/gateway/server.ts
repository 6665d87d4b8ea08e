import type { FileSystem, Path } from "@effect/platform"
import { Effect, Runtime, Schema } from "effect"
import * as http from "node:http"
import type * as net from "node:net"
import type { Duplex } from "node:stream"
import { OrgConfig } from "../config/OrgConfig.js"
import { Paths } from "../config/Paths.js"
import type { AllowRule, GrantRule } from "../config/schema.js"
import { VERSION } from "../version.js"
import { isLoopback, isRefusedAddress, isValidHost, normalizeHost } from "./addresses.js"
import { audit, type AuditRecord } from "./audit.js"
import { Dialer } from "./Dialer.js"
import { type Caller, identify } from "./identify.js"
import { decide, ruleNamesAddress } from "./policy.js"

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

class Refusal {
  constructor(readonly status: number, readonly reason: string) {}
}

const HOP_BY_HOP = new Set([
  "proxy-authorization", "proxy-connection", "proxy-authenticate", "connection", "keep-alive", "te", "trailer", "upgrade"
])

/** Starts the gateway on every address; the scope closes the listeners and open tunnels. */
export const serveGateway = Effect.fn("gateway.serve")(function*(options: GatewayOptions) {
  const runtime = yield* Effect.runtime<OrgConfig | Dialer | Paths | FileSystem.FileSystem | Path.Path>()
  const run = Runtime.runFork(runtime)
  const paths = yield* Paths
  const config = yield* OrgConfig
  const dialer = yield* Dialer
  const sockets = new Set<net.Socket>()
  let boundPort = options.port

  /** Policy, then the address actually dialled: never loopback/private/metadata unless a rule names it, never ourselves. */
  const authorize = (caller: Caller, rawHost: string, port: number) =>
    Effect.gen(function*() {
      const host = normalizeHost(rawHost)
      if (!isValidHost(host) || !Number.isInteger(port) || port < 1 || port > 65535) {
        return yield* Effect.fail(new Refusal(400, "malformed target"))
      }
      const org = yield* config.snapshot.pipe(Effect.mapError(() => new Refusal(403, "org.toml is invalid: nothing is allowed until it is fixed")))
      const decision = decide(org, caller.subject, host, port)
      if (!decision.allowed) return yield* Effect.fail(new Refusal(403, decision.reason))
      const rule: AllowRule | GrantRule = decision.rule
      const addrs = yield* dialer.resolve(host).pipe(Effect.mapError((e) => new Refusal(502, e.detail)))
      if (addrs.length === 0) return yield* Effect.fail(new Refusal(502, `${host} has no address`))
      for (const a of addrs) {
        if (port === boundPort && (isLoopback(a) || options.addrs.includes(a))) {
          return yield* Effect.fail(new Refusal(403, "the gateway does not proxy to itself"))
        }
        // One refused address refuses the host: a mixed answer is how DNS rebinding starts.
        if (isRefusedAddress(a) && !ruleNamesAddress(rule, a)) {
          return yield* Effect.fail(new Refusal(403, `${host} resolves to ${a}, a private/loopback/metadata address no rule names`))
        }
      }
      return { host, address: addrs[0] as string }
    })

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
      if (!m) {
        refuseSocket(client, 400, "roster gateway: CONNECT wants host:port")
        return yield* record({ ...withCaller, status: 400, bytes_up: 0, bytes_down: 0 }, startedAt)
      }
      const ok = yield* authorize(caller, m[1] ?? "", Number(m[2])).pipe(Effect.either)
      if (ok._tag === "Left") {
        refuseSocket(client, ok.left.status, `roster gateway: ${ok.left.reason}`)
        return yield* record({ ...withCaller, status: ok.left.status, bytes_up: 0, bytes_down: 0, note: ok.left.reason }, startedAt)
      }
      const upstream = yield* dialer.connect(ok.right.address, Number(m[2])).pipe(Effect.either)
      if (upstream._tag === "Left") {
        refuseSocket(client, 502, `roster gateway: ${upstream.left.detail}`)
        return yield* record({ ...withCaller, host: ok.right.host, status: 502, bytes_up: 0, bytes_down: 0, note: upstream.left.detail }, startedAt)
      }
      const up = upstream.right
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
      if (url.protocol !== "http:" || url.username || url.password) {
        res.writeHead(400).end("roster gateway: only plain http:// absolute URIs (use CONNECT for https)\n")
        return yield* record({ ...withCaller, status: 400, bytes_up: 0, bytes_down: 0 }, startedAt)
      }
      const ok = yield* authorize(who.caller, url.hostname, base.port).pipe(Effect.either)
      if (ok._tag === "Left") {
        res.writeHead(ok.left.status).end(`roster gateway: ${ok.left.reason}\n`)
        return yield* record({ ...withCaller, status: ok.left.status, bytes_up: 0, bytes_down: 0, note: ok.left.reason }, startedAt)
      }
      const headers: http.OutgoingHttpHeaders = {}
      for (const [k, v] of Object.entries(req.headers)) if (!HOP_BY_HOP.has(k) && v !== undefined) headers[k] = v
      headers.host = url.host
      const upstream = yield* dialer.connect(ok.right.address, base.port).pipe(Effect.either)
      if (upstream._tag === "Left") {
        res.writeHead(502).end(`roster gateway: ${upstream.left.detail}\n`)
        return yield* record({ ...withCaller, status: 502, bytes_up: 0, bytes_down: 0 }, startedAt)
      }
      const sock = upstream.right
      const counts = yield* Effect.async<{ status: number; up: number; down: number }>((resume) => {
        let up = 0
        let down = 0
        const out = http.request({
          method,
          path: `${url.pathname}${url.search}`,
          headers,
          // The socket already dialled to the checked address: no agent, no second lookup.
          createConnection: () => sock
        }, (upRes) => {
          // A redirect goes back to the box as it came: the gateway never follows one.
          const pairs: Array<string> = []
          for (let i = 0; i + 1 < upRes.rawHeaders.length; i += 2) {
            const k = upRes.rawHeaders[i] as string
            if (!HOP_BY_HOP.has(k.toLowerCase())) pairs.push(k, upRes.rawHeaders[i + 1] as string)
          }
          res.writeHead(upRes.statusCode ?? 502, pairs)
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
      yield* record({ ...withCaller, status: counts.status, bytes_up: counts.up, bytes_down: counts.down }, startedAt)
    })

  const onRequest = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const target = req.url ?? ""
    if (target.startsWith("/")) {
      if (req.method === "GET" && target === "/healthz") {
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
        sockets.add(socket as net.Socket)
        socket.once("close", () => sockets.delete(socket as net.Socket))
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
