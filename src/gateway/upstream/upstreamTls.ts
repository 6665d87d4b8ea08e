import { Effect } from "effect"
import * as net from "node:net"
import * as tls from "node:tls"
import { Refusal } from "../base/refusal.js"

/** TLS to an upstream, verified: the certificate must name `host` (a name via SNI, or an IP address). */
export const upstreamTls = (socket: net.Socket, host: string, secureContext: tls.SecureContext) =>
  Effect.async<tls.TLSSocket, Refusal>((resume) => {
    const s = tls.connect({
      socket, host, secureContext, rejectUnauthorized: true, ALPNProtocols: ["http/1.1"],
      ...(net.isIP(host) ? {} : { servername: host })
    })
    s.once("secureConnect", () => resume(Effect.succeed(s)))
    s.once("error", (e) => resume(Effect.fail(new Refusal(502, `upstream TLS failed: ${e.message}`, { why: "upstream" }))))
    return Effect.sync(() => s.destroy())
  })
