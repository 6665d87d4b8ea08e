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

/** The run token as a box's client sends it to the gateway (none: a host-side caller). */
const proxyAuth = (token: string | undefined): Record<string, string> =>
  token ? { "proxy-authorization": `Basic ${Buffer.from(`${token}:x`).toString("base64")}` } : {}

/** What a box's HTTPS client does through HTTPS_PROXY: CONNECT with its token, TLS inside, one request. */
export const viaGateway = (
  gatewayPort: number,
  token: string | undefined,
  target: string,
  request: { method?: string; path: string; headers?: Record<string, string>; body?: string },
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
      const secured = tls.connect({ socket, host, ca: [...ca], ...(net.isIP(host) ? {} : { servername: host }) })
      secured.once("error", reject)
      const req = http.request({
        method: request.method ?? "GET", path: request.path, headers: { host, ...request.headers }, createConnection: () => secured
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
