import { Effect } from "effect"
import { isValidHost } from "../../contract/addresses.js"
import type { Caller } from "../base/identify.js"
import type { Upstream } from "../base/policy.js"
import { upstreamFor } from "../base/policy.js"
import { Refusal } from "../base/refusal.js"
import { authorize, type Authorized, dialChecked, namedBy } from "../egress/authorize.js"
import { Gateway } from "../egress/Gateway.js"
import type { GrantRule } from "../../config/schema.js"
import { hasRules, type RuledEntry } from "../base/requestRules.js"
import { asInjected } from "../secrets/credentials.js"
import { type Injected, injectCredential } from "../secrets/inject.js"
import type * as http from "node:http"
import { upstreamTls } from "../upstream/upstreamTls.js"
import { freshCredential } from "./oauthRefresh.js"

/** Who a terminated TLS connection belongs to: set when the CONNECT was authorised. */
export interface Target {
  readonly caller: Caller
  readonly host: string
  readonly port: number
}

/**
 * What a request inside a terminated tunnel needs before anything of it leaves: the host still
 * reached by this caller's rule (policy is read again: org.toml may have changed since the CONNECT),
 * and where the host's upstream is; for a [[grant]], its credential connected and fresh. An [[allow]]
 * is terminated only while it has request rules, and injects nothing (`grant` and `credential` absent).
 * Untraced: it runs on every request the gateway handles, and a traced step (a span and a stack
 * capture per call) measured 13–26 µs against 1–3 µs untraced (docs/PERFORMANCE.md).
 */
export const grantedCredential = Effect.fnUntraced(function*(target: Target) {
  const authorized = yield* authorize(target.caller, target.host, target.port)
  const decision = authorized.decision
  const upstream = upstreamFor(authorized.org, target.host, target.port, "https:")
  if (!isValidHost(upstream.host)) return yield* Effect.fail(new Refusal(502, "the route's upstream is not a valid host", { why: "upstream" }))
  if (decision.via === "allow") {
    // The tunnel was opened to be decided request by request: an allow without rules now would tunnel blind, a new connection's to do.
    if (!hasRules(decision.rule)) return yield* Effect.fail(new Refusal(403, "the [[allow]] for this host no longer has request rules; reconnect", { why: "no_rule" }))
    return { authorized, entry: decision.rule as RuledEntry, grant: undefined, credential: undefined, upstream }
  }
  const grant = decision.rule
  const credential = asInjected(grant, yield* freshCredential(authorized.org, grant.credential))
  if (!credential) {
    return yield* Effect.fail(new Refusal(502,
      `no credential "${grant.credential}" for grant "${grant.name}" — connect one: roster connection add ${grant.credential}`, { why: "no_credential" }))
  }
  return { authorized, entry: grant as RuledEntry, grant: grant as GrantRule | undefined, credential: credential as InjectedCredential | undefined, upstream }
})

type InjectedCredential = NonNullable<ReturnType<typeof asInjected>>

/** The box's head with the grant's credential in (an intercepted [[allow]] has none: the head goes as sent, nothing to scrub). */
export const injectGranted = (headers: http.IncomingHttpHeaders, credential: InjectedCredential | undefined): Injected =>
  credential ? injectCredential(headers, credential.kind, credential.value) : { headers: { ...headers }, injected: false, reveals: [] }

/**
 * A new connection to the upstream: a [[route]] names its upstream outright; otherwise the grant
 * must name a private address. Dialled and checked, its TLS verified (with the deployment's
 * extra roots) when the upstream speaks https.
 */
export const openUpstream = (authorized: Authorized, upstream: Upstream) =>
  Effect.gen(function*() {
    const self = yield* Gateway
    const dialled = yield* dialChecked(upstream.host, upstream.port, upstream.routed ? () => true : namedBy(authorized))
    if (upstream.protocol !== "https:") return dialled.socket
    const trust = yield* self.upstreamTrust(authorized.org.gateway.upstream_ca_file)
    return yield* upstreamTls(dialled.socket, upstream.host, trust)
  })
