import * as net from "node:net"
import type { Policy } from "../../config/policy.js"
import { normalizeHost } from "../../contract/addresses.js"
import type { Caller } from "../base/identify.js"
import { Refusal } from "../base/refusal.js"
import { headsOf, pathAsWritten } from "./asked.js"
import { decide, VETTED } from "./decide.js"
import type { Dial, Settled, Verdict } from "./verdict.js"

/**
 * A request as `roster policy check` is asked it: the method, the headers and the body a box would send
 * (a body left out is one the check cannot see: a rule that reads it says so), and whether it is a
 * WebSocket handshake. The check builds the same request value the gateway reads off the wire.
 */
export interface CheckedRequest {
  readonly method?: string | undefined
  /** Header lines as sent ("Name: value"). */
  readonly headers?: ReadonlyArray<string> | undefined
  readonly body?: Buffer | undefined
  readonly websocket?: boolean | undefined
}

/** The verdict's fields, for `--json`, the Gateway page and the differential test: what the gateway would do, and with what. */
export interface VerdictView {
  /** tunnel, intercept, forward, hold, read_body or refuse: the verdict on the request (on the CONNECT, for a bare host:port or a tunnel). */
  readonly kind: "tunnel" | "intercept" | "forward" | "hold" | "read_body" | "refuse"
  readonly entry?: string
  /** The rule that decided: `rule 2 (…)`, `its default (…)`, or for a hold the rule that asks. */
  readonly by?: string
  /** The request target the upstream would get (its canonical form where a rule decided it). */
  readonly url?: string
  /** The credential that would be injected, by its connection's name. */
  readonly injects?: string
  /** Where it would be dialled. */
  readonly dial?: string
  readonly status?: number
  readonly why?: string
}

/** What a box's request to `url` would meet at the gateway, decided without sending anything. */
export type PolicyAnswer =
  | {
    readonly allowed: true
    readonly host: string
    readonly port: number
    readonly subject: string
    /** The entry that decided: a [[grant]] by name, an [[allow]] by its hosts. */
    readonly rule: string
    readonly how: "terminated" | "intercepted" | "tunnelled" | "forwarded"
    readonly credential?: string
    readonly upstream?: string
    /** An entry with request rules: what they make of this request (or that they decide each request). */
    readonly request?: string
    /** A rule (or `[gateway] approvals = "ask"`) holds this request for a person: it waits for an approval (`roster approve`). */
    readonly asked?: boolean
    /** What still happens at request time (name resolution, the credential, budgets). */
    readonly notes: ReadonlyArray<string>
    readonly verdict: VerdictView
  }
  | { readonly allowed: false; readonly status: number; readonly refusal: Refusal; readonly verdict: VerdictView }

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

/** The body a box would send for one GraphQL operation ("mutation:CreateIssue") or one JSON-RPC call ("tools/call:write_file"). */
export const probeBody = (o: { readonly graphqlOp?: string | undefined; readonly jsonrpc?: string | undefined }): Buffer | undefined => {
  if (o.graphqlOp !== undefined) {
    const [type, name] = o.graphqlOp.split(":")
    return Buffer.from(JSON.stringify({ query: `${type ?? "query"} ${name ?? ""} { __typename }` }))
  }
  if (o.jsonrpc !== undefined) {
    const [method, tool] = o.jsonrpc.split(":")
    const params = method === "tools/call" && tool !== undefined ? { name: tool, arguments: {} } : {}
    return Buffer.from(JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }))
  }
  return undefined
}

/** Header lines ("Name: value") as Node's parser gives them: names lower case, repeats of a list header joined. */
const headersOf = (lines: ReadonlyArray<string>): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const line of lines) {
    const colon = line.indexOf(":")
    if (colon <= 0) continue
    const name = line.slice(0, colon).trim().toLowerCase()
    const value = line.slice(colon + 1).trim()
    out[name] = out[name] === undefined ? value : `${out[name]}, ${value}`
  }
  return out
}

/** Who asks: a box of `worker` (a run, so a rule that asks can hold it), or the host itself ("org"). */
const callerOf = (subject: string): Caller => {
  const worker = subject.startsWith("org/") ? subject.slice(4) : null
  return { subject, runId: worker === null ? null : "(roster policy check)", worker, taskId: null }
}

/**
 * The gateway's own decision for `subject` reaching `raw` — the CONNECT a box's client opens for https (or a
 * bare host:port), then the request inside it; for http://, the plain request — decided by `decide` as the
 * gateway decides it, with nothing sent. A name is resolved only when a box asks, so what it resolves to is
 * said as a note; so are the credential's presence and budgets, which the gateway reads as it serves.
 */
export const checkPolicy = (policy: Policy, subject: string, raw: string, request: CheckedRequest = {}): PolicyAnswer => {
  const caller = callerOf(subject)
  const target = parseTarget(raw)
  if (!target) return refused(new Refusal(400, "malformed target", { why: "malformed", subject }))
  const connect = target.scheme === "http" ? undefined : decide(policy, caller, { _tag: "Connect", host: target.host, port: target.port })
  if (connect !== undefined && (connect._tag !== "Intercept" || target.path === undefined)) return answerOf(target, subject, connect, undefined, request)
  if (target.path === undefined) return refused(new Refusal(400, "malformed target", { why: "malformed", subject }))
  const method = request.method ?? "GET"
  const sent = request.body
  const lines = request.headers ?? []
  const authority = target.port === (target.scheme === "http" ? 80 : 443) ? target.host : `${target.host}:${target.port}`
  const given = headersOf(lines)
  const ask = (framing: Record<string, string>) =>
    decide(policy, caller, {
      _tag: "Request", via: target.scheme === "http" ? "plain" : "tls", host: target.host, port: target.port, method, target: target.path ?? "/",
      heads: headsOf({ host: authority, ...framing, ...(request.websocket ? { upgrade: "websocket", connection: "Upgrade" } : {}), ...given }),
      sni: target.scheme === "https" && net.isIP(target.host) === 0 ? target.host : undefined, upgrade: request.websocket === true,
      ...(sent !== undefined ? { body: { raw: sent } } : {})
    })
  if (sent !== undefined) return answerOf(target, subject, ask({ "content-length": String(sent.length) }), connect, request)
  // No body given: decided as a request without one — unless, were it to carry one, a rule would read it to decide (then
  // said so). A grant's model request is checked for provider-side tools when it is sent: that alone asks for no body here.
  const bodied = method === "GET" || method === "HEAD" || request.websocket ? undefined : ask({ "transfer-encoding": "chunked" })
  const verdict = bodied?._tag === "ReadBody" && bodied.why !== VETTED ? bodied : ask({})
  return answerOf(target, subject, verdict, connect, request)
}

const refused = (refusal: Refusal): PolicyAnswer => ({ allowed: false, status: refusal.status, refusal, verdict: viewOf({ _tag: "Refuse", refusal }) })

const dialText = (d: Dial) => `${d.protocol}//${d.host}:${d.port}`

/** A verdict's fields, as said by the check's --json and the Gateway page. */
export const viewOf = (v: Verdict): VerdictView => {
  switch (v._tag) {
    case "Refuse":
      return { kind: "refuse", status: v.refusal.status, why: v.refusal.detail.why }
    case "ReadBody":
      return { kind: "read_body", why: v.why }
    case "Hold":
      return { ...viewOf(v.then), kind: "hold", ...(v.rule ? { by: v.rule } : {}), status: v.refusal.status, why: v.rule ? "request_rule" : v.refusal.detail.why }
    case "Tunnel":
      return { kind: "tunnel", entry: v.entry, dial: dialText(v.dial) }
    case "Intercept":
      return { kind: "intercept", entry: v.entry, dial: dialText(v.dial), ...(v.inject ? { injects: v.inject.credential } : {}) }
    case "Forward":
      return {
        kind: "forward", entry: v.entry, url: v.url, dial: dialText(v.dial), ...(v.by ? { by: v.by } : {}), ...(v.inject ? { injects: v.inject.credential } : {})
      }
  }
}

const settledOf = (v: Verdict): Settled | undefined => (v._tag === "Hold" ? v.then : v._tag === "Refuse" || v._tag === "ReadBody" ? undefined : v)

/** The check's answer from the verdict on the request (and, for a request inside a tunnel, the CONNECT's, which names the entry). */
const answerOf = (target: Target, subject: string, v: Verdict, connect: Verdict | undefined, request: CheckedRequest): PolicyAnswer => {
  if (v._tag === "Refuse") return refused(v.refusal)
  const settled = settledOf(v) ?? (connect && settledOf(connect))
  const method = request.method ?? "GET"
  const what = request.websocket ? "a WebSocket upgrade on" : method
  const inject = settled?._tag === "Tunnel" ? undefined : settled?.inject
  const dial = settled?.dial
  const notes = dial && !dial.routed && net.isIP(dial.host) === 0
    ? [`${dial.host} is resolved when the box asks: an answer that is a private, loopback or metadata address is refused unless the rule lists that address`]
    : []
  const how = target.scheme === "http" ? "forwarded" : settled?._tag === "Tunnel" ? "tunnelled" : inject ? "terminated" : "intercepted"
  const said = v._tag === "ReadBody"
    ? `${method} ${target.path?.split("?")[0] ?? ""} is decided by its body (${v.why}): give --body (or --graphql-op, --jsonrpc) to check one`
    : v._tag === "Hold"
    ? `${what} ${v.asked.path ?? ""} asked: held until a person approves it (roster approve), by ${v.rule ?? "[gateway] approvals = \"ask\""}`
    : settled?._tag === "Forward" && settled.by !== undefined
    ? `${what} ${settled.url.split("?")[0]} allowed by ${settled.by}`
    : settled?._tag === "Intercept" && settled.ruled ? "each request is decided by the entry's rules: give a URL to check one" : undefined
  return {
    allowed: true, host: target.host, port: target.port, subject, rule: settled?.entry ?? "", how,
    ...(inject ? { credential: inject.credential } : {}),
    ...(dial?.routed ? { upstream: dialText(dial) } : {}),
    ...(said ? { request: said } : {}),
    ...(v._tag === "Hold" ? { asked: true } : {}),
    notes,
    verdict: viewOf(v)
  }
}
