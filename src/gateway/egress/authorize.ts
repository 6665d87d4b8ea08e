import { Effect } from "effect"
import { OrgConfig } from "../../config/OrgConfig.js"
import type { Org } from "../../config/schema.js"
import { isLoopback, isRefusedAddress, isValidHost, normalizeHost } from "../../contract/addresses.js"
import { Dialer } from "../base/Dialer.js"
import type { Caller } from "../base/identify.js"
import { Gateway } from "./Gateway.js"
import { decide, type Decision, ruleNamesAddress } from "../base/policy.js"
import { Refusal } from "../base/refusal.js"

export type Allowed = Extract<Decision, { allowed: true }>

export interface Authorized {
  readonly host: string
  readonly port: number
  readonly decision: Allowed
  readonly org: Org
}

/** Policy first: is this subject allowed this host:port, and by which rule? */
export const authorize = (caller: Caller, rawHost: string, port: number) =>
  Effect.gen(function*() {
    const host = normalizeHost(rawHost)
    if (!isValidHost(host) || !Number.isInteger(port) || port < 1 || port > 65535) {
      return yield* Effect.fail(new Refusal(400, "malformed target", { why: "malformed", subject: caller.subject }))
    }
    const where = { host, port, subject: caller.subject }
    const org = yield* (yield* OrgConfig).snapshot.pipe(
      Effect.mapError(() =>
        new Refusal(403, "org.toml is invalid: nothing is allowed until it is fixed (roster doctor names the error)", { why: "config_invalid", ...where })
      )
    )
    const decision = decide(org, caller.subject, host, port)
    if (!decision.allowed) return yield* Effect.fail(new Refusal(403, decision.reason, { why: decision.why, ...where, fix: decision.fix }))
    return { host, port, decision, org } satisfies Authorized
  })

/**
 * The address actually dialled: never loopback, private, link-local, CGNAT or metadata unless
 * `named` says a rule (or a [[route]]) lists it, and never the gateway itself. One refused
 * address refuses the name: a mixed answer is how DNS rebinding starts.
 */
export const dialChecked = (host: string, port: number, named: (address: string) => boolean) =>
  Effect.gen(function*() {
    const self = yield* Gateway
    const dialer = yield* Dialer
    const where = { host, port }
    const addrs = yield* dialer.resolve(host).pipe(Effect.mapError((e) => new Refusal(502, e.detail, { why: "upstream", ...where })))
    if (addrs.length === 0) return yield* Effect.fail(new Refusal(502, `${host} has no address`, { why: "upstream", ...where }))
    for (const a of addrs) {
      if (port === self.port() && (isLoopback(a) || self.addrs.includes(a) || a === "0.0.0.0")) {
        return yield* Effect.fail(new Refusal(403, "the gateway does not proxy to itself", { why: "gateway_itself", ...where }))
      }
      if (isRefusedAddress(a) && !named(a)) {
        return yield* Effect.fail(
          new Refusal(403, `${host} resolves to ${a}, a private/loopback/metadata address no rule names`, {
            why: "refused_address", ...where,
            fix: [`# name the address in the rule that allows ${host}:`, `hosts = [${JSON.stringify(host)}, ${JSON.stringify(a)}]`]
          })
        )
      }
    }
    const address = addrs[0] as string
    const socket = yield* dialer.connect(address, port).pipe(Effect.mapError((e) => new Refusal(502, e.detail, { why: "upstream", ...where })))
    return { socket, address }
  })

export const namedBy = (a: Authorized) => (address: string) => ruleNamesAddress(a.decision.rule, address)

