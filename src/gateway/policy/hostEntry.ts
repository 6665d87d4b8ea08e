import * as net from "node:net"
import { normalHostMatches } from "../../config/hosts.js"
import type { Policy, PolicyEntry } from "../../config/policy.js"
import { isLoopback } from "../../contract/addresses.js"
import { scopeAdmits } from "../../contract/scope.js"
import { allowLines, Refusal } from "../base/refusal.js"
import type { Dial } from "./verdict.js"

type Where = { readonly host: string; readonly port: number; readonly subject: string }

const ruleName = (e: PolicyEntry) => (e.kind === "grant" ? `the [[grant]] named ${JSON.stringify(e.grant?.name)}` : `the [[allow]] for hosts = ${JSON.stringify(e.hosts)}`)

/**
 * Deny by default: the entry through which `subject` reaches host:port — a [[grant]] (TLS terminated, the
 * credential injected) or an [[allow]] — whose hosts, ports and scope match; a grant wins over an allow for
 * the same host, so a credential is never silently skipped. A refusal says what would change the answer.
 */
export const entryFor = (policy: Policy, where: Where): PolicyEntry | Refusal => {
  const { host, port, subject } = where
  // The common case first, with nothing made: the entry that admits this caller.
  for (const e of policy.entries) {
    if (e.ports.includes(port) && e.hosts.some((h) => normalHostMatches(h, host)) && scopeAdmits(e.scope, subject)) return e
  }
  const forHost = policy.entries.filter((e) => e.hosts.some((h) => normalHostMatches(h, host)))
  // A granted host reached by a subject outside the grant's scope: widening that grant's scope is the fix,
  // never an [[allow]] or another port (either would send the box's placeholder upstream uninjected).
  const outOfScope = (e: PolicyEntry) =>
    new Refusal(403, `${host}:${port} is not allowed for ${subject}: ${ruleName(e)} covers it for ${e.scope.join(", ")} only`, {
      why: "no_rule", ...where, fix: [`# in ${ruleName(e)}:`, `scope = ${JSON.stringify([...e.scope, subject])}`]
    })
  const grantElsewhere = forHost.find((e) => e.kind === "grant" && e.ports.includes(port))
  if (grantElsewhere) return outOfScope(grantElsewhere)
  const wrongPort = forHost.find((e) => scopeAdmits(e.scope, subject))
  if (wrongPort) {
    const ports = wrongPort.ports
    return new Refusal(403, `${host}:${port} is not allowed for ${subject}: ${ruleName(wrongPort)} covers ${host} on port${ports.length > 1 ? "s" : ""} ${ports.join(", ")} only`, {
      why: "wrong_port", ...where, fix: [`# in ${ruleName(wrongPort)}:`, `ports = [${[...ports, port].join(", ")}]`]
    })
  }
  const allowElsewhere = forHost.find((e) => e.ports.includes(port))
  if (allowElsewhere) return outOfScope(allowElsewhere)
  return new Refusal(403, `${host}:${port} is not allowed for ${subject} (no [[grant]] or [[allow]] in org.toml covers it)`, {
    why: "no_rule", ...where, fix: allowLines(host, port, subject)
  })
}

/** Where traffic for host:port of `entry` is dialled: the host's [[route]] if it has one, else the host itself over `protocol`. */
export const dialFor = (policy: Policy, entry: PolicyEntry, host: string, port: number, protocol: Dial["protocol"]): Dial => {
  const route = policy.routes.get(host)
  const to = route ?? { host, port, protocol }
  return {
    ...to,
    routed: route !== undefined,
    names: entry.addresses,
    key: `${to.protocol}//${to.host}:${to.port} ${route !== undefined} ${entry.key}`
  }
}

/**
 * The gateway never proxies to itself: a dial whose upstream is a loopback or unspecified literal on the
 * gateway's own port is refused here, as the dial refuses one whose name resolves there.
 */
export const itselfRefusal = (policy: Policy, dial: Dial, where: Where): Refusal | undefined =>
  dial.port === policy.org.gateway.port && net.isIP(dial.host) !== 0 && (isLoopback(dial.host) || dial.host === "0.0.0.0" || dial.host === "::")
    ? new Refusal(403, "the gateway does not proxy to itself", { why: "gateway_itself", ...where })
    : undefined
