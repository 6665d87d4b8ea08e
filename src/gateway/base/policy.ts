import * as net from "node:net"
import type { AllowRule, GrantRule, Org } from "../../config/schema.js"
import { scopeAdmits } from "../../contract/scope.js"
import { normalizeHost } from "../../contract/addresses.js"
import { allowLines } from "./refusal.js"

export type Decision =
  | { readonly allowed: true; readonly via: "grant"; readonly rule: GrantRule }
  | { readonly allowed: true; readonly via: "allow"; readonly rule: AllowRule }
  | { readonly allowed: false; readonly why: "no_rule" | "wrong_port"; readonly reason: string; readonly fix: ReadonlyArray<string> }

/** "*.example.com" matches a subdomain (not the apex); anything else matches exactly, after normalising. */
export const hostMatches = (pattern: string, host: string): boolean => {
  const p = normalizeHost(pattern)
  if (p.startsWith("*.")) return host.endsWith(p.slice(1)) && host.length > p.length - 1
  return p === host
}

const portsOf = (rule: { readonly ports?: ReadonlyArray<number> | undefined }) => rule.ports && rule.ports.length > 0 ? rule.ports : [443]

const portMatches = (rule: { readonly ports?: ReadonlyArray<number> | undefined }, port: number) => portsOf(rule).includes(port)

type Rule = { readonly kind: "grant"; readonly rule: GrantRule } | { readonly kind: "allow"; readonly rule: AllowRule }

const ruleName = (r: Rule) => r.kind === "grant" ? `the [[grant]] named ${JSON.stringify(r.rule.name)}` : `the [[allow]] for hosts = ${JSON.stringify(r.rule.hosts)}`

/**
 * Deny by default: a host:port is reachable only through a `[[grant]]` (TLS terminated, the
 * credential injected) or an `[[allow]]` (tunnelled as is; with request rules, terminated and
 * decided request by request, nothing injected) whose hosts, ports and scope match
 * the calling subject. A grant wins over an allow for the same host, so a credential is never
 * silently skipped. A refusal says what would change the answer.
 */
export const decide = (org: Org, subject: string, rawHost: string, port: number): Decision => {
  const host = normalizeHost(rawHost)
  const rules: ReadonlyArray<Rule> = [
    ...org.grant.map((rule) => ({ kind: "grant" as const, rule })),
    ...org.allow.map((rule) => ({ kind: "allow" as const, rule }))
  ]
  const forHost = rules.filter((r) => r.rule.hosts.some((h) => hostMatches(h, host)))
  for (const r of forHost) {
    if (portMatches(r.rule, port) && scopeAdmits(r.rule.scope, subject)) {
      return r.kind === "grant" ? { allowed: true, via: "grant", rule: r.rule } : { allowed: true, via: "allow", rule: r.rule }
    }
  }
  // A granted host reached by a subject outside the grant's scope: widening that grant's scope is
  // the fix, never an [[allow]] or another port (either would send the box's placeholder upstream uninjected).
  const outOfScope = (r: Rule) => ({
    allowed: false as const, why: "no_rule" as const,
    reason: `${host}:${port} is not allowed for ${subject}: ${ruleName(r)} covers it for ${r.rule.scope.join(", ")} only`,
    fix: [`# in ${ruleName(r)}:`, `scope = ${JSON.stringify([...r.rule.scope, subject])}`]
  })
  const grantElsewhere = forHost.find((r) => r.kind === "grant" && portMatches(r.rule, port))
  if (grantElsewhere) return outOfScope(grantElsewhere)
  const wrongPort = forHost.find((r) => scopeAdmits(r.rule.scope, subject))
  if (wrongPort) {
    return {
      allowed: false, why: "wrong_port",
      reason: `${host}:${port} is not allowed for ${subject}: ${ruleName(wrongPort)} covers ${host} on port${portsOf(wrongPort.rule).length > 1 ? "s" : ""} ${portsOf(wrongPort.rule).join(", ")} only`,
      fix: [`# in ${ruleName(wrongPort)}:`, `ports = [${[...portsOf(wrongPort.rule), port].join(", ")}]`]
    }
  }
  const allowElsewhere = forHost.find((r) => portMatches(r.rule, port))
  if (allowElsewhere) return outOfScope(allowElsewhere)
  return {
    allowed: false, why: "no_rule",
    reason: `${host}:${port} is not allowed for ${subject} (no [[grant]] or [[allow]] in org.toml covers it)`,
    fix: allowLines(host, port, subject)
  }
}

/** The [[route]] for a host, if any: where its traffic really goes. */
export const routeFor = (org: Org, host: string) => org.route.find((r) => normalizeHost(r.host) === host)

export interface Upstream {
  readonly host: string
  readonly port: number
  readonly protocol: "http:" | "https:"
  /** A route names its upstream outright, private address or not. */
  readonly routed: boolean
}

/** Where traffic for host:port goes: the host's [[route]] if it has one, else the host itself over `protocol`. */
export const upstreamFor = (org: Org, host: string, port: number, protocol: Upstream["protocol"]): Upstream => {
  const route = routeFor(org, host)
  if (!route) return { host, port, protocol, routed: false }
  const u = new URL(route.upstream)
  const scheme = u.protocol === "https:" ? "https:" : "http:"
  return { host: normalizeHost(u.hostname), port: Number(u.port || (scheme === "https:" ? 443 : 80)), protocol: scheme, routed: true }
}

/** A rule "names" an address when it lists that literal address: the only way past the private-address guard. */
export const ruleNamesAddress = (rule: AllowRule | GrantRule, addr: string): boolean =>
  net.isIP(addr) !== 0 && rule.hosts.some((h) => normalizeHost(h) === normalizeHost(addr))
