import type * as http from "node:http"
import type { Duplex } from "node:stream"
import { Refusal, refusalBody } from "./refusal.js"

const STATUS_TEXT: Record<number, string> = {
  400: "Bad Request", 402: "Payment Required", 403: "Forbidden", 404: "Not Found", 407: "Proxy Authentication Required", 413: "Payload Too Large",
  431: "Request Header Fields Too Large", 500: "Internal Server Error", 502: "Bad Gateway"
}

const headersOf = (r: Refusal, length: number): Record<string, string> => ({
  ...(r.status === 407 ? { "proxy-authenticate": `Basic realm="roster"` } : {}),
  "content-type": "application/json",
  "content-length": String(length),
  // A refusal is policy, not a hiccup: the model SDKs honour this and do not retry it.
  ...(r.status < 500 ? { "x-should-retry": "false" } : {}),
  "x-roster-refusal": r.detail.why
})

const bodyOf = (r: Refusal) => `${JSON.stringify(refusalBody(r))}\n`

/** A refusal on a raw socket (CONNECT, client errors): a complete response, then close. */
export const refuseSocket = (socket: Duplex, r: Refusal) => {
  if (!socket.writable) return socket.destroy()
  const body = bodyOf(r)
  const head = Object.entries({ ...headersOf(r, Buffer.byteLength(body)), connection: "close" }).map(([k, v]) => `${k}: ${v}\r\n`).join("")
  socket.end(`HTTP/1.1 ${r.status} ${STATUS_TEXT[r.status] ?? "Error"}\r\n${head}\r\n${body}`)
}

/** A refusal as an HTTP answer; once the answer has begun, the connection is cut instead. */
export const refuseResponse = (res: http.ServerResponse, r: Refusal) => {
  if (res.headersSent) return void res.destroy()
  const body = bodyOf(r)
  // A body over the limit is not read to its end: the connection cannot carry another request.
  res.writeHead(r.status, { ...headersOf(r, Buffer.byteLength(body)), ...(r.status === 413 ? { connection: "close" } : {}) }).end(body)
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
  refuseSocket(socket, new Refusal(400, "bad request (HTTP/1.0 or HTTP/1.1 only)"))
  return true
}
