import { refuseTraced } from "../base/refuseTraced.js"
import { Effect } from "effect"
import type * as http from "node:http"
import type * as net from "node:net"
import type { Duplex } from "node:stream"
import { authorizeOrAsk, socketEnded } from "./approve.js"
import { approvedNote } from "./byRules.js"
import { dialChecked, namedBy } from "./authorize.js"
import { Gateway } from "./Gateway.js"
import { awaitPreflight } from "./preflightGate.js"
import { Refusal } from "../base/refusal.js"
import type { Caller } from "../base/identify.js"
import { identify, refusalStatus } from "../base/identify.js"
import { upstreamFor } from "../base/policy.js"
import { hasRules } from "../base/requestRules.js"
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
 * A CONNECT: who is calling, is the target allowed, and by which rule. A granted host goes to
 * the TLS terminator, as does one an [[allow]] with request rules covers; any other [[allow]]ed one
 * is tunnelled to the checked address as is.
 */
export const handleConnect = (ctx: ConnectContext, req: http.IncomingMessage, client: Duplex, head: Buffer, trace: RequestTrace) =>
  Effect.gen(function*() {
    const self = yield* Gateway
    // A refusal of egress taints the caller's run (known once the token is read).
    const refuse = refuseTraced(self.taints, trace, (r) => refuseSocket(client, r))
    const target = parseConnectTarget(req.url ?? "")
    if (target) {
      trace.host = target.host
      trace.port = target.port
    }
    const who = yield* identify(req.headers, req.socket.remoteAddress, self.identities)
    if (!who.ok) return yield* refuse(new Refusal(refusalStatus(who.why), who.reason, { why: who.why }))
    const caller = who.caller
    trace.run_id = caller.runId
    trace.subject = caller.subject
    if (!target) return yield* refuse(new Refusal(400, "CONNECT wants host:port"), caller)
    const held = yield* awaitPreflight(caller).pipe(Effect.either)
    if (held._tag === "Left") return yield* refuse(held.left, caller)
    const ok = yield* authorizeOrAsk(caller, target.host, target.port, { method: "CONNECT", path: null }, socketEnded(client)).pipe(Effect.either)
    if (ok._tag === "Left") return yield* refuse(ok.left, caller)
    trace.host = ok.right.host
    // An [[allow]] with request rules is intercepted as a grant is (the box trusts roster's CA), to be decided request by request.
    if (ok.right.decision.via === "grant" || hasRules(ok.right.decision.rule)) {
      return yield* ctx.terminate(client, head, caller, ok.right.host, ok.right.port).pipe(
        Effect.catchAll((e) => refuse(new Refusal(502, `cannot present a certificate for ${e.host}`), caller))
      )
    }
    const to = upstreamFor(ok.right.org, ok.right.host, ok.right.port, "https:")
    const dialled = yield* dialChecked(to.host, to.port, to.routed ? () => true : namedBy(ok.right)).pipe(Effect.either)
    if (dialled._tag === "Left") return yield* refuse(dialled.left, caller)
    const up = dialled.right.socket
    ctx.sockets.add(up)
    client.write("HTTP/1.1 200 Connection Established\r\n\r\n")
    const bytes = yield* pipeBoth(client, up, head).pipe(Effect.ensuring(Effect.sync(() => ctx.sockets.delete(up))))
    yield* auditTrace(trace, {
      status: 200, bytes_up: bytes.up, bytes_down: bytes.down, ...(ok.right.approvedBy ? { note: approvedNote(ok.right.approvedBy) } : {})
    })
  })
