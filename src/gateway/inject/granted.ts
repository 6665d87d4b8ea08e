import { Effect } from "effect"
import { isValidHost } from "../../contract/addresses.js"
import type { Caller } from "../base/identify.js"
import type { Upstream } from "../base/policy.js"
import { upstreamFor } from "../base/policy.js"
import { Refusal } from "../base/refusal.js"
import { authorize, type Authorized, dialChecked, namedBy } from "../egress/authorize.js"
import { Gateway } from "../egress/Gateway.js"
import { asInjected } from "../secrets/credentials.js"
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
 * granted to this caller (policy is read again: org.toml may have changed since the CONNECT),
 * the grant's credential connected and fresh, and where the host's upstream is.
 * Untraced: it runs on every request the gateway handles, and a traced step (a span and a stack
 * capture per call) measured 13–26 µs against 1–3 µs untraced (docs/PERFORMANCE.md).
 */
export const grantedCredential = Effect.fnUntraced(function*(target: Target) {
  const authorized = yield* authorize(target.caller, target.host, target.port)
  const decision = authorized.decision
  if (decision.via !== "grant") return yield* Effect.fail(new Refusal(403, "the grant for this host is gone; reconnect", { why: "no_rule" }))
  const grant = decision.rule
  const credential = asInjected(grant, yield* freshCredential(authorized.org, grant.credential))
  if (!credential) {
    return yield* Effect.fail(new Refusal(502,
      `no credential "${grant.credential}" for grant "${grant.name}" — connect one: roster connection add ${grant.credential}`, { why: "no_credential" }))
  }
  const upstream = upstreamFor(authorized.org, target.host, target.port, "https:")
  if (!isValidHost(upstream.host)) return yield* Effect.fail(new Refusal(502, "the route's upstream is not a valid host", { why: "upstream" }))
  return { authorized, grant, credential, upstream }
})

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
