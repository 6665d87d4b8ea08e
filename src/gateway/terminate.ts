import { Effect, Runtime } from "effect"
import * as fs from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import type { Duplex } from "node:stream"
import * as tls from "node:tls"
import { SENTINEL } from "../box/constants.js"
import { isValidHost } from "./addresses.js"
import { audit } from "./audit.js"
import { authorize, dialChecked, namedBy, Refusal, type Self } from "./authorize.js"
import { systemRoots } from "./ca.js"
import { resolveCredential } from "./credentials.js"
import type { GatewayEnv } from "./env.js"
import { forwardable, responsePairs } from "./headers.js"
import type { Caller } from "./identify.js"
import { injectCredential } from "./inject.js"
import type { LeafIssuer } from "./leafCerts.js"
import { upstreamFor } from "./policy.js"
import { Scrub, scrubText } from "./scrub.js"

interface Target {
  readonly caller: Caller
  readonly host: string
  readonly port: number
}

/** The system's roots plus an org-configured extra file (a private or test upstream). */
const trustRoots = (extraFile: string | undefined): Array<string> =>
  [systemRoots(), ...(extraFile && fs.existsSync(extraFile) ? [fs.readFileSync(extraFile, "utf8")] : [])]

/** TLS to the upstream, verified: the certificate must name `host` (a name via SNI, or an IP address). */
const upstreamTls = (socket: net.Socket, host: string, ca: Array<string>) =>
  Effect.async<tls.TLSSocket, Refusal>((resume) => {
    const s = tls.connect({
      socket, host, ca, rejectUnauthorized: true, ALPNProtocols: ["http/1.1"],
      ...(net.isIP(host) ? {} : { servername: host })
    })
    s.once("secureConnect", () => resume(Effect.succeed(s)))
    s.once("error", (e) => resume(Effect.fail(new Refusal(502, `upstream TLS failed: ${e.message}`))))
    return Effect.sync(() => s.destroy())
  })

/**
 * TLS termination for hosts with an injecting grant: the box gets a leaf certificate for the
 * host from the roster CA; each request inside is re-authorised, gets the real credential in
 * the one header its kind uses, goes to the verified upstream (or the host's [[route]]), and
 * comes back with the real value scrubbed out and streaming intact.
 */
export const makeTerminator = Effect.fn("gateway.makeTerminator")(function*(self: Self, issuer: LeafIssuer) {
  const runtime = yield* Effect.runtime<GatewayEnv>()
  const run = Runtime.runFork(runtime)
  const targets = new WeakMap<object, Target>()

  const handle = (req: http.IncomingMessage, res: http.ServerResponse) =>
    Effect.gen(function*() {
      const startedAt = Date.now()
      const target = targets.get(req.socket)
      const url = req.url ?? "/"
      const method = req.method ?? "GET"
      if (!target || !url.startsWith("/")) {
        res.writeHead(400).end("roster gateway: bad request\n")
        return
      }
      const base = {
        run_id: target.caller.runId, subject: target.caller.subject, host: target.host, port: target.port,
        method, path: url.split("?")[0] ?? "/", injected: false
      }
      const refuse = (r: Refusal) =>
        Effect.gen(function*() {
          if (!res.headersSent) res.writeHead(r.status, { "content-type": "text/plain" }).end(`roster gateway: ${r.reason}\n`)
          else res.destroy()
          yield* audit({ ...base, status: r.status, bytes_up: 0, bytes_down: 0, duration_ms: Date.now() - startedAt, note: r.reason })
        })

      const ok = yield* authorize(target.caller, target.host, target.port).pipe(Effect.either)
      if (ok._tag === "Left") return yield* refuse(ok.left)
      const decision = ok.right.decision
      if (decision.via !== "grant") return yield* refuse(new Refusal(403, "the grant for this host is gone; reconnect"))
      const grant = decision.rule
      const credential = yield* resolveCredential(grant)
      if (!credential) {
        return yield* refuse(new Refusal(502,
          `no credential "${grant.credential}" for grant "${grant.name}" — connect one: roster connection add ${grant.credential}`))
      }
      const { headers, injected, reveals } = injectCredential(req.headers, credential.kind, credential.value)
      const out = forwardable(headers)
      // The answer is scanned for the real value, so it must arrive uncompressed.
      out["accept-encoding"] = "identity"

      const upstream = upstreamFor(ok.right.org, target.host, target.port, "https:")
      if (!isValidHost(upstream.host)) return yield* refuse(new Refusal(502, "the route's upstream is not a valid host"))
      // A [[route]] names its upstream outright; otherwise the grant must name a private address.
      const dialled = yield* dialChecked(self, upstream.host, upstream.port, upstream.routed ? () => true : namedBy(ok.right)).pipe(Effect.either)
      if (dialled._tag === "Left") return yield* refuse(dialled.left)
      let socket: net.Socket = dialled.right.socket
      if (upstream.protocol === "https:") {
        const secured = yield* upstreamTls(socket, upstream.host, trustRoots(ok.right.org.gateway.upstream_ca_file)).pipe(Effect.either)
        if (secured._tag === "Left") return yield* refuse(secured.left)
        socket = secured.right
      }
      const limit = ok.right.org.gateway.max_body_mib * 1024 * 1024
      const secrets = reveals
      const result = yield* Effect.async<{ status: number; up: number; down: number; note?: string }>((resume) => {
        let up = 0
        let down = 0
        const upReq = http.request({ method, path: url, headers: out, createConnection: () => socket }, (upRes) => {
          // Length may change when a secret is scrubbed: the box gets a chunked answer instead.
          res.writeHead(
            upRes.statusCode ?? 502,
            responsePairs(upRes.rawHeaders, new Set(["content-length"]), (v) => scrubText(v, secrets, SENTINEL))
          )
          res.flushHeaders()
          upRes.on("data", (c: Buffer) => (down += c.length))
          upRes.pipe(new Scrub(secrets, Buffer.from(SENTINEL))).pipe(res)
          upRes.once("end", () => resume(Effect.succeed({ status: upRes.statusCode ?? 502, up, down })))
          upRes.once("error", () => resume(Effect.succeed({ status: 502, up, down, note: "upstream closed mid-answer" })))
        })
        upReq.once("error", (e) => {
          if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" }).end(`roster gateway: ${e.message}\n`)
          else res.destroy()
          resume(Effect.succeed({ status: 502, up, down, note: e.message }))
        })
        req.on("data", (c: Buffer) => {
          up += c.length
          if (up > limit) {
            upReq.destroy()
            req.unpipe(upReq)
            if (!res.headersSent) res.writeHead(413, { "content-type": "text/plain", connection: "close" }).end("roster gateway: request body too large\n")
            resume(Effect.succeed({ status: 413, up, down, note: "body over the limit" }))
          }
        })
        req.pipe(upReq)
        return Effect.sync(() => upReq.destroy())
      })
      yield* audit({
        ...base, status: result.status, injected, bytes_up: result.up, bytes_down: result.down,
        duration_ms: Date.now() - startedAt, ...(result.note ? { note: result.note } : {})
      })
    })

  const inner = http.createServer(
    { maxHeaderSize: 16 * 1024, headersTimeout: 15_000, requestTimeout: 0, keepAliveTimeout: 60_000 },
    (req, res) => run(handle(req, res).pipe(Effect.catchAllCause(() => Effect.sync(() => res.destroy()))))
  )
  inner.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex) => {
    const status = err.code === "HPE_HEADER_OVERFLOW" ? 431 : 400
    if (socket.writable) socket.end(`HTTP/1.1 ${status} Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`)
    else socket.destroy()
  })
  yield* Effect.addFinalizer(() => Effect.sync(() => inner.close()))

  /** Answers the CONNECT, then speaks TLS as `host` on the box's side of the tunnel. */
  const terminate = (client: Duplex, head: Buffer, caller: Caller, host: string, port: number) =>
    Effect.gen(function*() {
      const context = yield* issuer.contextFor(host)
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n")
      if (head.length > 0) client.unshift(head)
      const secured = new tls.TLSSocket(client as net.Socket, { isServer: true, secureContext: context, ALPNProtocols: ["http/1.1"] })
      secured.on("error", () => secured.destroy())
      targets.set(secured, { caller, host, port })
      inner.emit("connection", secured)
    })

  return { terminate }
})
