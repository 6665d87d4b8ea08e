import * as net from "node:net"
import type { Org } from "../../config/schema.js"
import { isLoopback, isValidHost, normalizeHost } from "../../contract/addresses.js"
import { pathAsWritten } from "./canonicalPath.js"
import { decide, upstreamFor } from "./policy.js"
import { Refusal } from "./refusal.js"
import { entryName, hasRules, type RequestBody, type RuledEntry, ruleRequest } from "./requestRules.js"

/** What a box's request to `url` would meet at the gateway, decided without sending anything. */
export type PolicyAnswer =
  | {
    readonly allowed: true
    readonly host: string
    readonly port: number
    readonly subject: string
    /** The rule that decided: a [[grant]] by name, an [[allow]] by its hosts. */
    readonly rule: string
    readonly how: "terminated" | "intercepted" | "tunnelled" | "forwarded"
    readonly credential?: string
    readonly upstream?: string
    /** An entry with request rules: what they make of this method and path (or that they decide each request). */
    readonly request?: string
    /** The grant's rule asks a person about this request: it waits for an approval (`roster approve`). */
    readonly asked?: boolean
    /** What still happens at request time (name resolution). */
    readonly notes: ReadonlyArray<string>
  }
  | { readonly allowed: false; readonly status: number; readonly refusal: Refusal }

interface Target {
  readonly host: string
  readonly port: number
  readonly scheme: "https" | "http" | "tunnel"
  /** The request target (path and query) of a URL; none for a bare host:port. */
  readonly path?: string
}

/** `https://host[:port]/…`, `http://host[:port]/…`, or a bare `host:port` (a CONNECT, as a box's client sends for any TLS). */
export const parseTarget = (raw: string): Target | undefined => {
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(raw)?.[1]?.toLowerCase()
  if (scheme === undefined) {
    const m = /^\[?([^\]/]*?)\]?:(\d{1,5})$/.exec(raw)
    return m ? { host: normalizeHost(m[1] ?? ""), port: Number(m[2]), scheme: "tunnel" } : undefined
  }
  if (scheme !== "http" && scheme !== "https") return undefined
  try {
    const u = new URL(raw)
    return { host: normalizeHost(u.hostname), port: Number(u.port || (scheme === "https" ? 443 : 80)), scheme, path: pathAsWritten(raw) }
  } catch {
    return undefined
  }
}

/**
 * The gateway's decision for `subject` reaching `raw`, in the order the gateway takes it:
 * the target parses, a rule covers host, port and subject, a granted host is reached over TLS,
 * and it is not the gateway itself. A name is resolved only when a box asks, so a private
 * answer then is said as a note, not decided here.
 */
/** The body a box would send for one GraphQL operation ("mutation:CreateIssue") or one JSON-RPC call ("tools/call:write_file"): what policy check decides. */
export const probeBody = (o: { readonly graphqlOp?: string | undefined; readonly jsonrpc?: string | undefined }): RequestBody | undefined => {
  if (o.graphqlOp !== undefined) {
    const [type, name] = o.graphqlOp.split(":")
    return { contentType: "application/json", raw: Buffer.from(JSON.stringify({ query: `${type ?? "query"} ${name ?? ""} { __typename }` })) }
  }
  if (o.jsonrpc !== undefined) {
    const [method, tool] = o.jsonrpc.split(":")
    const params = method === "tools/call" && tool !== undefined ? { name: tool, arguments: {} } : {}
    return { contentType: "application/json", raw: Buffer.from(JSON.stringify({ jsonrpc: "2.0", id: 1, method, params })) }
  }
  return undefined
}

export const checkPolicy = (org: Org, subject: string, raw: string, method = "GET", body?: RequestBody, upgrade = false): PolicyAnswer => {
  const target = parseTarget(raw)
  const where = { subject, ...(target ? { host: target.host, port: target.port } : {}) }
  const refused = (r: Refusal): PolicyAnswer => ({ allowed: false, status: r.status, refusal: r })
  if (!target || !isValidHost(target.host) || !Number.isInteger(target.port) || target.port < 1 || target.port > 65535) {
    return refused(new Refusal(400, "malformed target", { why: "malformed", ...where }))
  }
  const { host, port } = target
  const decision = decide(org, subject, host, port)
  if (!decision.allowed) return refused(new Refusal(403, decision.reason, { why: decision.why, ...where, fix: decision.fix }))
  if (decision.via === "grant" && target.scheme === "http") {
    return refused(new Refusal(403, "credentials are injected only over TLS: use https://", { why: "tls_only", ...where }))
  }
  const up = upstreamFor(org, host, port, target.scheme === "http" ? "http:" : "https:")
  // An address literal a rule covers is one that rule names, so the private-address guard can only
  // refuse what a name resolves to — known when a box asks, said below as a note.
  if (up.port === org.gateway.port && (isLoopback(up.host) || up.host === "0.0.0.0")) {
    return refused(new Refusal(403, "the gateway does not proxy to itself", { why: "gateway_itself", ...where }))
  }
  // An entry with request rules decides each request: the URL's method and path, or a note that it will.
  const ruled = byRulesOf(decision.rule, method, target.path, { host, port, subject }, body, upgrade)
  if ("refusal" in ruled) return refused(ruled.refusal)
  const intercepted = decision.via === "allow" && hasRules(decision.rule)
  const notes = !up.routed && net.isIP(up.host) === 0
    ? [`${up.host} is resolved when the box asks: an answer that is a private, loopback or metadata address is refused unless the rule lists that address`]
    : []
  return {
    allowed: true, host, port, subject,
    rule: decision.via === "grant" ? `[[grant]] ${JSON.stringify(decision.rule.name)}` : `[[allow]] hosts = ${JSON.stringify(decision.rule.hosts)}`,
    how: decision.via === "grant" ? "terminated" : target.scheme === "http" ? "forwarded" : intercepted ? "intercepted" : "tunnelled",
    ...(decision.via === "grant" ? { credential: decision.rule.credential } : {}),
    ...(up.routed ? { upstream: `${up.protocol}//${up.host}:${up.port}` } : {}),
    ...(ruled.request ? { request: ruled.request } : {}),
    ...(ruled.asked ? { asked: true } : {}),
    notes
  }
}

/** What an entry's rules make of a checked URL: a line to say, whether it is asked, or the refusal. */
const byRulesOf = (entry: RuledEntry, method: string, path: string | undefined, where: { host: string; port: number; subject: string }, body: RequestBody | undefined, upgrade: boolean):
  | { readonly request?: string; readonly asked?: boolean }
  | { readonly refusal: Refusal } =>
{
  if (!hasRules(entry)) return {}
  const what = upgrade ? "a WebSocket upgrade on" : method
  if (path === undefined) return { request: `each request is decided by the entry's rules (method and path): give a URL to check one` }
  const ruled = ruleRequest(entry, method, path, where, body, upgrade)
  if (!ruled.ok && ruled.needsBody) {
    return { request: `${method} ${path} is decided by its body (a GraphQL or JSON-RPC rule): give --graphql-op or --jsonrpc to check one` }
  }
  if (ruled.ok) return { request: `${what} ${ruled.url.split("?")[0]} allowed by ${ruled.by ?? entryName(entry)}` }
  if (!ruled.ask) return { refusal: ruled.refusal }
  return { asked: true, request: `${what} ${ruled.ask.path} asked: held until a person approves it (roster approve), by ${ruled.ask.rule}` }
}
