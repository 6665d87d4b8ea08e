import * as net from "node:net"
import type { AllowRule, GrantRule, Org } from "../config/schema.js"
import { scopeAdmits } from "../contract/scope.js"
import { normalizeHost } from "../contract/addresses.js"

export type Decision =
  | { readonly allowed: true; readonly via: "grant"; readonly rule: GrantRule }
  | { readonly allowed: true; readonly via: "allow"; readonly rule: AllowRule }
  | { readonly allowed: false; readonly reason: string }

/** "*.example.com" matches a subdomain (not the apex); anything else matches exactly, after normalising. */
export const hostMatches = (pattern: string, host: string): boolean => {
  const p = normalizeHost(pattern)
  if (p.startsWith("*.")) return host.endsWith(p.slice(1)) && host.length > p.length - 1
  return p === host
}

const portMatches = (rule: { readonly ports?: ReadonlyArray<number> | undefined }, port: number) =>
  (rule.ports && rule.ports.length > 0 ? rule.ports : [443]).includes(port)

/**
 * Deny by default: a host:port is reachable only through a `[[grant]]` (TLS terminated, the
 * credential injected) or an `[[allow]]` (tunnelled as is) whose hosts, ports and scope match
 * the calling subject. A grant wins over an allow for the same host, so a credential is never
 * silently skipped.
 */
export const decide = (org: Org, subject: string, rawHost: string, port: number): Decision => {
  const host = normalizeHost(rawHost)
  for (const rule of org.grant) {
    if (rule.hosts.some((h) => hostMatches(h, host)) && portMatches(rule, port) && scopeAdmits(rule.scope, subject)) {
      return { allowed: true, via: "grant", rule }
    }
  }
  for (const rule of org.allow) {
    if (rule.hosts.some((h) => hostMatches(h, host)) && portMatches(rule, port) && scopeAdmits(rule.scope, subject)) {
      return { allowed: true, via: "allow", rule }
    }
  }
  return { allowed: false, reason: `${host}:${port} is not allowed for ${subject} (no matching [[grant]] or [[allow]] in org.toml)` }
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
