import * as http from "node:http"
import * as net from "node:net"
import * as tls from "node:tls"

export interface Reply {
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
  /** ms since the request, for each chunk of the body as it arrived */
  readonly arrivals: ReadonlyArray<number>
}

/** A target's Host header as clients send it: its port named unless it is https's own (443). */
export const authority = (target: string) => (target.endsWith(":443") ? target.slice(0, -4) : target)

/** The run token as a box's client sends it to the gateway (none: a host-side caller). */
const proxyAuth = (token: string | undefined): Record<string, string> =>
  token ? { "proxy-authorization": `Basic ${Buffer.from(`${token}:x`).toString("base64")}` } : {}

/** What a box's HTTPS client does through HTTPS_PROXY: CONNECT with its token, TLS inside, one request. */
export const viaGateway = (
  gatewayPort: number,
  token: string | undefined,
  target: string,
  /** `servername`: the TLS SNI to send instead of the target's host. */
  request: { method?: string; path: string; headers?: Record<string, string>; body?: string; servername?: string },
  ca: ReadonlyArray<string>
) =>
  new Promise<Reply>((resolve, reject) => {
    const started = Date.now()
    const connect = http.request({
      host: "127.0.0.1", port: gatewayPort, method: "CONNECT", path: target,
      headers: proxyAuth(token)
    })
    connect.once("connect", (res, socket, head) => {
      if (res.statusCode !== 200) {
        // A refusal's body follows its head on the socket, which the gateway then closes.
        let body = head.toString()
        socket.on("data", (c: Buffer) => (body += c.toString()))
        socket.once("close", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body, arrivals: [] }))
        return
      }
      const host = target.slice(0, target.lastIndexOf(":"))
      const servername = request.servername ?? (net.isIP(host) ? undefined : host)
      // The leaf is the tunnel's host's whatever SNI was sent: checked against it, not the SNI.
      const secured = tls.connect({ socket, host, ca: [...ca], ...(servername ? { servername, checkServerIdentity: (_n, cert) => tls.checkServerIdentity(host, cert) } : {}) })
      secured.once("error", reject)
      const req = http.request({
        method: request.method ?? "GET", path: request.path, headers: { host: authority(target), ...request.headers }, createConnection: () => secured
      }, (res) => {
        let body = ""
        const arrivals: Array<number> = []
        res.on("data", (c: Buffer) => {
          arrivals.push(Date.now() - started)
          body += c.toString()
        })
        res.on("end", () => {
          secured.destroy()
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body, arrivals })
        })
      })
      req.once("error", reject)
      req.end(request.body)
    })
    connect.once("error", reject)
    connect.end()
  })


/**
 * A box's client that keeps one connection through the gateway (CONNECT with its token, TLS
 * inside) and sends each request on it in turn, as an SDK's keep-alive agent does: after the
 * first, the gateway answers them on a grant it decided a moment ago (fastForward).
 */
export const keptAlive = async (gatewayPort: number, token: string, target: string, ca: ReadonlyArray<string>) => {
  const host = target.slice(0, target.lastIndexOf(":"))
  const secured = await new Promise<tls.TLSSocket>((resolve, reject) => {
    const connect = http.request({ host: "127.0.0.1", port: gatewayPort, method: "CONNECT", path: target, headers: proxyAuth(token) })
    connect.once("connect", (res, socket) => {
      if (res.statusCode !== 200) return reject(new Error(`CONNECT answered ${res.statusCode}`))
      const s = tls.connect({ socket, host, ca: [...ca], ...(net.isIP(host) ? {} : { servername: host }) })
      s.once("secureConnect", () => resolve(s))
      s.once("error", reject)
    })
    connect.once("error", reject)
    connect.end()
  })
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  Object.assign(agent, { createConnection: () => secured })
  let closed = false
  secured.once("close", () => (closed = true))
  return {
    request: (request: { method?: string; path: string; headers?: Record<string, string>; body?: string }) =>
      new Promise<Reply>((resolve, reject) => {
        const started = Date.now()
        const req = http.request({ method: request.method ?? "GET", path: request.path, headers: { host: authority(target), ...request.headers }, agent }, (res) => {
          let body = ""
          const arrivals: Array<number> = []
          res.on("data", (c: Buffer) => {
            arrivals.push(Date.now() - started)
            body += c.toString()
          })
          res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body, arrivals }))
        })
        req.once("error", reject)
        req.end(request.body)
      }),
    /** Whether the gateway (or the client) has closed the connection. */
    closed: () => closed,
    close: () => {
      agent.destroy()
      secured.destroy()
    }
  }
}

/** What a box's plain-http client does through HTTP_PROXY: the absolute URI, with its token. */
export const forwardVia = (gatewayPort: number, token: string | undefined, url: string) =>
  new Promise<Reply>((resolve, reject) => {
    const req = http.request({
      host: "127.0.0.1", port: gatewayPort, method: "GET", path: url,
      headers: proxyAuth(token)
    }, (res) => {
      let body = ""
      res.on("data", (c: Buffer) => (body += c.toString()))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body, arrivals: [] }))
    })
    req.once("error", reject)
    req.end()
  })

/** Only the CONNECT: its status (200 when the gateway opened the tunnel) and a refusal's body. */
export const connectVia = (gatewayPort: number, token: string | undefined, target: string) =>
  new Promise<Reply>((resolve, reject) => {
    const connect = http.request({
      host: "127.0.0.1", port: gatewayPort, method: "CONNECT", path: target,
      headers: proxyAuth(token)
    })
    connect.once("connect", (res, socket, head) => {
      let body = head.toString()
      if (res.statusCode === 200) {
        socket.destroy()
        return resolve({ status: 200, headers: res.headers, body, arrivals: [] })
      }
      socket.on("data", (c: Buffer) => (body += c.toString()))
      socket.once("close", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body, arrivals: [] }))
    })
    connect.once("error", reject)
    connect.end()
  })

export interface WsSession {
  /** The CONNECT's or the handshake's status (101 when the WebSocket opened). */
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  /** Each message as the box's client got it, in order. */
  readonly messages: ReadonlyArray<string>
  /** How the connection closed: the close code and reason, when it closed with a frame. */
  readonly closed: { readonly code: number; readonly reason: string }
}

/**
 * What a box's WebSocket client does through HTTPS_PROXY: CONNECT with its token, TLS inside
 * (trusting `ca`), the `ws` library's handshake, `send` each message once open; it collects
 * `expect` messages (or whatever arrived by the close), then closes.
 */
export const wsVia = (
  gatewayPort: number,
  token: string,
  target: string,
  path: string,
  o: { readonly headers?: Record<string, string>; readonly send?: ReadonlyArray<string>; readonly expect: number; readonly ca: ReadonlyArray<string> }
) =>
  new Promise<WsSession>((resolve, reject) => {
    const connect = http.request({ host: "127.0.0.1", port: gatewayPort, method: "CONNECT", path: target, headers: proxyAuth(token) })
    connect.once("connect", async (res, socket) => {
      if (res.statusCode !== 200) return resolve({ status: res.statusCode ?? 0, headers: res.headers, messages: [], closed: { code: 0, reason: "" } })
      const { WebSocket } = await import("ws")
      const host = target.slice(0, target.lastIndexOf(":"))
      const secured = tls.connect({ socket, host, ca: [...o.ca], ...(net.isIP(host) ? {} : { servername: host }) })
      const ws = new WebSocket(`wss://${target}${path}`, { headers: o.headers ?? {}, createConnection: () => secured })
      const messages: Array<string> = []
      let headers: http.IncomingHttpHeaders = {}
      let status = 0
      ws.once("upgrade", (r) => {
        status = r.statusCode ?? 0
        headers = r.headers
      })
      ws.once("unexpected-response", (_req, r) => {
        let body = ""
        r.on("data", (c: Buffer) => (body += c.toString()))
        r.once("end", () => resolve({ status: r.statusCode ?? 0, headers: r.headers, messages: [body], closed: { code: 0, reason: "" } }))
      })
      ws.once("open", () => {
        for (const m of o.send ?? []) ws.send(m)
      })
      ws.on("message", (data) => {
        messages.push(data.toString())
        if (messages.length >= o.expect) ws.close(1000, "done")
      })
      ws.once("close", (code, reason) => resolve({ status, headers, messages, closed: { code, reason: reason.toString() } }))
      ws.once("error", (e) => (status === 0 ? reject(e) : undefined))
    })
    connect.once("error", reject)
    connect.end()
  })

/**
 * What a box's preflight check does once it ran: reports its result to the gateway with the run
 * token. The gateway holds every other request of the run until this is in, so a test that
 * speaks for a box without one sends it first. The answer's status (200: this decided it).
 */
export const reportPreflight = (gatewayPort: number, token: string, result = { ok: true, check: "all", detail: "test: the box's check passed" }) =>
  new Promise<number>((resolve, reject) => {
    const body = JSON.stringify(result)
    const req = http.request({
      host: "127.0.0.1", port: gatewayPort, method: "POST", path: "/v1/preflight",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", "content-length": Buffer.byteLength(body) }
    }, (res) => {
      res.resume()
      res.once("end", () => resolve(res.statusCode ?? 0))
    })
    req.once("error", reject)
    req.end(body)
  })

/**
 * A box's TLS handshake through its CONNECT tunnel, offering `session` (a ticket from an earlier
 * connection, as undici and curl keep them): whether the gateway resumed it, and the ticket
 * this connection got.
 */
export const tlsHandshakeVia = (gatewayPort: number, token: string, target: string, ca: ReadonlyArray<string>, session?: Buffer) =>
  new Promise<{ readonly reused: boolean; readonly session: Buffer | undefined }>((resolve, reject) => {
    const connect = http.request({ host: "127.0.0.1", port: gatewayPort, method: "CONNECT", path: target, headers: proxyAuth(token) })
    connect.once("connect", (res, socket) => {
      if (res.statusCode !== 200) return reject(new Error(`CONNECT answered ${res.statusCode}`))
      const host = target.slice(0, target.lastIndexOf(":"))
      let ticket: Buffer | undefined
      const secured = tls.connect({ socket, servername: host, ca: [...ca], ...(session ? { session } : {}) })
      secured.on("session", (s: Buffer) => (ticket = s))
      secured.once("error", reject)
      // TLS 1.3 sends its tickets after the handshake: a moment for them to arrive.
      secured.once("secureConnect", () => setTimeout(() => {
        resolve({ reused: secured.isSessionReused(), session: ticket })
        secured.destroy()
      }, 50))
    })
    connect.once("error", reject)
    connect.end()
  })

/**
 * Raw bytes a box writes, and everything it reads back until the connection closes (or `ms` pass): into a
 * tunnel to `target` (CONNECT with its token, TLS with `ca`), or, with no target, to the gateway's own port
 * (a plain-http client's connection). For what a well-behaved client never sends: pipelined requests, a
 * preface, a path past the cap, bytes after an upgrade.
 */
export const rawVia = (gatewayPort: number, token: string, target: string | undefined, bytes: string, ca: ReadonlyArray<string> = [], ms = 3000) =>
  new Promise<string>((resolve, reject) => {
    const exchange = (socket: net.Socket | tls.TLSSocket) => {
      let got = ""
      socket.on("data", (c: Buffer) => (got += c.toString("latin1")))
      const done = () => resolve(got)
      socket.once("close", done)
      socket.once("error", done)
      setTimeout(() => {
        socket.destroy()
        done()
      }, ms)
      socket.write(bytes)
    }
    if (target === undefined) {
      const s = net.connect(gatewayPort, "127.0.0.1", () => exchange(s))
      s.once("error", reject)
      return
    }
    const connect = http.request({ host: "127.0.0.1", port: gatewayPort, method: "CONNECT", path: target, headers: proxyAuth(token) })
    connect.once("connect", (res, socket) => {
      if (res.statusCode !== 200) return reject(new Error(`CONNECT answered ${res.statusCode}`))
      const host = target.slice(0, target.lastIndexOf(":"))
      const secured = tls.connect({ socket, servername: host, ca: [...ca] })
      secured.once("secureConnect", () => exchange(secured))
      secured.once("error", reject)
    })
    connect.once("error", reject)
    connect.end()
  })
