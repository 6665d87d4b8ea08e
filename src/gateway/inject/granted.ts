import { Effect } from "effect"
import type * as http from "node:http"
import type * as net from "node:net"
import type { Policy } from "../../config/policy.js"
import { isValidHost } from "../../contract/addresses.js"
import type { Caller } from "../base/identify.js"
import { Refusal } from "../base/refusal.js"
import { decideNow } from "../egress/decision.js"
import { dialChecked } from "../egress/dial.js"
import { Gateway } from "../egress/Gateway.js"
import { type AskedRequest, headsOf } from "../policy/asked.js"
import type { Dial, Intercept } from "../policy/verdict.js"
import { asInjected } from "../secrets/credentials.js"
import { type Injected, injectCredential } from "../secrets/inject.js"
import { upstreamTls } from "../upstream/upstreamTls.js"
import { freshCredential } from "./oauthRefresh.js"

/** Who a terminated TLS connection belongs to: set when the CONNECT was authorised. */
export interface Target {
  readonly caller: Caller
  readonly host: string
  readonly port: number
}

export type InjectedCredential = NonNullable<ReturnType<typeof asInjected>>

/** What a terminated connection's requests go by: the policy each is decided by, its CONNECT's verdict under it, a grant's credential. */
export interface Granted {
  readonly policy: Policy
  readonly intercept: Intercept
  /** A [[grant]]'s credential, connected and fresh; none on an intercepted [[allow]]. */
  readonly credential: InjectedCredential | undefined
}

/**
 * What a request inside a terminated tunnel needs before anything of it leaves: the connection's CONNECT
 * decided again (org.toml may have changed since it opened) — still intercepted — and, for a [[grant]], its
 * credential connected and fresh. Each request is then decided by the same policy.
 * Untraced: it runs on every request the gateway handles, and a traced step (a span and a stack
 * capture per call) measured 13–26 µs against 1–3 µs untraced (docs/PERFORMANCE.md).
 */
export const connectionGrant = Effect.fnUntraced(function*(target: Target) {
  const { policy, verdict } = yield* decideNow(target.caller, { _tag: "Connect", host: target.host, port: target.port })
  if (verdict._tag === "Refuse" || verdict._tag === "Hold") return yield* Effect.fail(verdict.refusal)
  if (verdict._tag !== "Intercept") {
    // The tunnel was opened to be decided request by request: an allow without rules now would tunnel blind, a new connection's to do.
    return yield* Effect.fail(new Refusal(403, "the [[allow]] for this host no longer has request rules; reconnect", { why: "no_rule" }))
  }
  if (!isValidHost(verdict.dial.host)) return yield* Effect.fail(new Refusal(502, "the route's upstream is not a valid host", { why: "upstream" }))
  const inject = verdict.inject
  if (!inject) return { policy, intercept: verdict, credential: undefined } satisfies Granted
  const credential = asInjected(inject, yield* freshCredential(policy, inject.credential))
  if (!credential) {
    return yield* Effect.fail(new Refusal(502,
      `no credential "${inject.credential}" for grant "${inject.grant}" — connect one: roster connection add ${inject.credential}`, { why: "no_credential" }))
  }
  return { policy, intercept: verdict, credential } satisfies Granted
})

/** The box's head with the grant's credential in (an intercepted [[allow]] has none: the head goes as sent, nothing to scrub). */
export const injectGranted = (headers: http.IncomingHttpHeaders, credential: InjectedCredential | undefined): Injected =>
  credential ? injectCredential(headers, credential.kind, credential.value) : { headers: { ...headers }, injected: false, reveals: [] }

/**
 * A new connection to a verdict's upstream: a [[route]] names its upstream outright; otherwise its entry
 * must name a private address. Dialled and checked, its TLS verified (with the deployment's extra roots)
 * when the upstream speaks https.
 */
export const openUpstream = (dial: Dial, upstreamCaFile: string | undefined) =>
  Effect.gen(function*() {
    const self = yield* Gateway
    const dialled = yield* dialChecked(dial)
    if (dial.protocol !== "https:") return dialled.socket
    const trust = yield* self.upstreamTrust(upstreamCaFile)
    return yield* upstreamTls(dialled.socket, dial.host, trust)
  })

/** The TLS server name the box sent on a terminated connection, if any. */
export const sniOf = (socket: net.Socket): string | false | undefined => (socket as net.Socket & { readonly servername?: string | false }).servername

/** A request inside the tunnel to `target`, as the decision reads it: its method, target and head, and the SNI the box sent. */
export const askedIn = (target: Target, req: http.IncomingMessage, upgrade = false): AskedRequest => ({
  _tag: "Request", via: "tls", host: target.host, port: target.port, method: req.method ?? "GET", target: req.url ?? "/",
  heads: headsOf(req.headers), sni: sniOf(req.socket), upgrade
})
