import { Effect } from "effect"
import type * as http from "node:http"
import type * as net from "node:net"
import type { Duplex } from "node:stream"
import { socketEnded } from "./approve.js"
import { callerOf } from "./caller.js"
import { answeringRefusals, approvedNote, decideNow, settle } from "./decision.js"
import { dialChecked } from "./dial.js"
import { awaitPreflight } from "./preflightGate.js"
import { Refusal } from "../base/refusal.js"
import type { Caller } from "../base/identify.js"
import { refuseSocket } from "../base/refuse.js"
import { auditTrace, type RequestTrace } from "../base/supervise.js"

export interface ConnectContext {
  /** Hands a granted host's tunnel to the TLS terminator (which audits each request inside). */
  readonly terminate: (client: Duplex, head: Buffer, caller: Caller, host: string, port: number) => Effect.Effect<void, { readonly host: string }>
  /** Open upstream sockets, closed with the gateway. */
  readonly sockets: Set<net.Socket>
}

/** `host:port` or `[v6]:port`; anything else is not a CONNECT target. */
export const parseConnectTarget = (target: string) => {
  const m = /^\[?([^\]]*?)\]?:(\d{1,5})$/.exec(target)
  return m ? { host: m[1] ?? "", port: Number(m[2]) } : undefined
}

/** How long one side of a tunnel may keep its half open after the other ended its own: then both are closed. */
export const TUNNEL_HALF_OPEN_MS = 3000

/**
 * Both ends piped until either closes; the bytes each way are the upstream socket's own counts
 * (no listener per chunk). Once one side has ended, the other has TUNNEL_HALF_OPEN_MS to end too:
 * a peer that keeps its half open forever does not keep the tunnel (and its audit line) open.
 */
const pipeBoth = (client: Duplex, up: net.Socket, head: Buffer) =>
  Effect.async<{ up: number; down: number }>((resume) => {
    if (head.length > 0) up.write(head)
    client.pipe(up)
    up.pipe(client)
    let open = 2
    let lingering: NodeJS.Timeout | undefined
    const done = () => {
      if (--open > 0) return
      clearTimeout(lingering)
      resume(Effect.succeed({ up: up.bytesWritten, down: up.bytesRead }))
    }
    const closeBoth = () => {
      clearTimeout(lingering)
      client.destroy()
      up.destroy()
    }
    const ended = () => {
      lingering ??= setTimeout(closeBoth, TUNNEL_HALF_OPEN_MS)
    }
    client.once("end", ended)
    up.once("end", ended)
    client.once("close", done)
    up.once("close", done)
    client.once("error", closeBoth)
    up.once("error", closeBoth)
    return Effect.sync(closeBoth)
  })

/**
 * A CONNECT: who is calling, then the decision. A granted host goes to the TLS terminator, as does one an
 * [[allow]] with request rules covers (each request inside is decided there); any other [[allow]]ed one is
 * tunnelled to the checked address as is. Every refusal is answered once, at the end.
 */
export const handleConnect = (ctx: ConnectContext, req: http.IncomingMessage, client: Duplex, head: Buffer, trace: RequestTrace) =>
  Effect.gen(function*() {
    const target = parseConnectTarget(req.url ?? "")
    if (target) {
      trace.host = target.host
      trace.port = target.port
    }
    const caller = yield* callerOf(req, trace)
    if (!target) return yield* new Refusal(400, "CONNECT wants host:port")
    yield* awaitPreflight(caller)
    const asked = { _tag: "Connect", host: target.host, port: target.port } as const
    const { policy, verdict } = yield* decideNow(caller, asked)
    const { approvedBy, settled } = yield* settle(policy, asked, verdict, { caller, readBody: () => Effect.succeed(Buffer.alloc(0)), closed: socketEnded(client) })
    trace.host = settled.host
    switch (settled._tag) {
      case "Intercept":
        // The box trusts roster's CA: each request inside is decided, a grant's credential injected.
        return yield* ctx.terminate(client, head, caller, settled.host, settled.port).pipe(
          Effect.mapError((e) => new Refusal(502, `cannot present a certificate for ${e.host}`))
        )
      case "Tunnel": {
        const dialled = yield* dialChecked(settled.dial)
        const up = dialled.socket
        ctx.sockets.add(up)
        client.write("HTTP/1.1 200 Connection Established\r\n\r\n")
        const bytes = yield* pipeBoth(client, up, head).pipe(Effect.ensuring(Effect.sync(() => ctx.sockets.delete(up))))
        return yield* auditTrace(trace, {
          status: 200, bytes_up: bytes.up, bytes_down: bytes.down, ...(approvedBy ? { note: approvedNote(approvedBy) } : {})
        })
      }
      case "Forward":
        return yield* Effect.dieMessage("a CONNECT was decided as a request")
    }
  }).pipe(answeringRefusals(trace, (r) => refuseSocket(client, r)))
