import type * as http from "node:http"
import type { Duplex } from "node:stream"

const STATUS_TEXT: Record<number, string> = {
  400: "Bad Request", 403: "Forbidden", 404: "Not Found", 407: "Proxy Authentication Required", 413: "Payload Too Large",
  431: "Request Header Fields Too Large", 500: "Internal Server Error", 502: "Bad Gateway"
}

/** A refusal on a raw socket (CONNECT, client errors): a complete response, then close. */
export const refuseSocket = (socket: Duplex, status: number, reason: string) => {
  if (!socket.writable) return socket.destroy()
  const body = `${reason}\n`
  const extra = status === 407 ? `Proxy-Authenticate: Basic realm="roster"\r\n` : ""
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? "Error"}\r\n${extra}Content-Type: text/plain\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  )
}

/** A refusal as an HTTP answer; once the answer has begun, the connection is cut instead. */
export const refuseResponse = (res: http.ServerResponse, status: number, reason: string) => {
  if (res.headersSent) return void res.destroy()
  const headers: http.OutgoingHttpHeaders = { "content-type": "text/plain" }
  if (status === 407) headers["proxy-authenticate"] = `Basic realm="roster"`
  res.writeHead(status, headers).end(`roster gateway: ${reason}\n`)
}

/**
 * Only HTTP/1.0 and 1.1 are spoken here. Node's parser reads a request line without a version
 * (`CONNECT host:port` and then header lines) as HTTP/0.9 and hands it on; a proxy that accepts
 * what its peers would parse differently is where request smuggling starts. Refused with 400
 * and a closed connection, like every other malformed request (the parser refuses the rest:
 * folding, conflicting lengths, bad names).
 */
export const refuseUnlessHttp1 = (req: http.IncomingMessage, socket: Duplex) => {
  if (req.httpVersionMajor === 1 && (req.httpVersionMinor === 0 || req.httpVersionMinor === 1)) return false
  refuseSocket(socket, 400, "roster gateway: bad request (HTTP/1.0 or HTTP/1.1 only)")
  return true
}
