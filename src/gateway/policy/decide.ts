import { approvedEntry, type Policy, type PolicyEntry } from "../../config/policy.js"
import { isValidHost, normalizeHost } from "../../contract/addresses.js"
import type { Caller } from "../base/identify.js"
import { Refusal } from "../base/refusal.js"
import type { Asked, AskedRequest } from "./asked.js"
import { mediaType } from "./bodyReads.js"
import { checkBody, isCheckedBody } from "./bodyVet.js"
import { canonicalTarget } from "./canonicalPath.js"
import { dialFor, entryFor, itselfRefusal } from "./hostEntry.js"
import { misdirectedRefusal, misdirection } from "./misdirected.js"
import { candidatesFor, decideEach, type DecidedCall } from "./requestRules.js"
import { bodyProblem, decodeBody, headProblem, mayOverride } from "./twoMeanings.js"
import { type AskedFor, type Dial, type Forward, type Hold, type Inject, type SentBody, type Tunnel, Verdict } from "./verdict.js"
import { segmentsOf } from "../../config/requestRule.js"

type Where = { readonly host: string; readonly port: number; readonly subject: string }

/** The most of a request body (or a WebSocket frame) the gateway reads: `[gateway] max_body_mib` in org.toml. */
export const bodyLimitOf = (policy: Policy) => policy.org.gateway.max_body_mib * 1024 * 1024

const refuse = (status: number, reason: string, detail: Refusal["detail"]) => Verdict.Refuse({ refusal: new Refusal(status, reason, detail) })
const validTarget = (host: string, port: number) => isValidHost(host) && Number.isInteger(port) && port >= 1 && port <= 65535

/**
 * What the gateway does with what it is asked — the one decision, a pure function of the compiled policy,
 * the caller and the request as read. Every listener (the CONNECT, the plain forward, each request and
 * WebSocket handshake inside a terminated tunnel, the fast path) and `roster policy check` call it and
 * act on its verdict; nothing else reads a grant, an allow or a rule. A request with two meanings on an
 * entry with rules is refused, never guessed (README, "What roster refuses as ambiguous").
 */
export const decide = (policy: Policy, caller: Caller, asked: Asked): Verdict =>
  asked._tag === "Connect" ? decideConnect(policy, caller, normalizeHost(asked.host), asked.port) : decideRequest(policy, caller, asked)

const decideConnect = (policy: Policy, caller: Caller, host: string, port: number): Verdict => {
  const where = { host, port, subject: caller.subject }
  if (!validTarget(host, port)) return refuse(400, "malformed target", { why: "malformed", subject: caller.subject })
  const entry = entryFor(policy, where)
  if (entry instanceof Refusal) return holdOrRefuse(policy, caller, entry, { method: "CONNECT", path: null }, where, (e) => tunnel(policy, e, where))
  const dial = dialFor(policy, entry, host, port, "https:")
  const itself = itselfRefusal(policy, dial, where)
  if (itself) return Verdict.Refuse({ refusal: itself })
  if (entry.kind === "grant" || entry.rules !== null) {
    return Verdict.Intercept({ host, port, entry: entry.name, inject: injectOf(entry), dial, ruled: entry.rules !== null })
  }
  return Verdict.Tunnel({ host, port, entry: entry.name, dial })
}

const tunnel = (policy: Policy, entry: PolicyEntry, where: Where) =>
  Verdict.Tunnel({ host: where.host, port: where.port, entry: entry.name, dial: dialFor(policy, entry, where.host, where.port, "https:") })

const injectOf = (entry: PolicyEntry): Inject | undefined =>
  entry.grant ? { grant: entry.grant.name, credential: entry.grant.credential, header: entry.grant.header, vet: entry.grant } : undefined

/**
 * A refusal by policy held for a person where `[gateway] approvals = "ask"` (a run's request for a host no
 * rule covers, or on a port it does not list): approved, it goes on as an [[allow]] of that one host:port.
 */
const holdOrRefuse = (policy: Policy, caller: Caller, refusal: Refusal, asked: AskedFor, where: Where, then: (entry: PolicyEntry) => Tunnel | Forward) => {
  const why = refusal.detail.why
  const holds = (why === "no_rule" || why === "wrong_port") && policy.org.gateway.approvals === "ask" && caller.runId !== null && caller.worker !== null
  if (!holds) return Verdict.Refuse({ refusal })
  return Verdict.Hold({ refusal, asked, rule: undefined, host: where.host, port: where.port, then: then(approvedEntry(where.host, where.port, where.subject)) })
}

const decideRequest = (policy: Policy, caller: Caller, r: AskedRequest): Verdict => {
  const host = normalizeHost(r.host)
  const where = { host, port: r.port, subject: caller.subject }
  if (!validTarget(host, r.port)) return refuse(400, "malformed target", { why: "malformed", subject: caller.subject })
  if (!r.target.startsWith("/")) return refuse(400, "bad request: the request target is not a path", { why: "malformed", ...where })
  if (r.via === "tls") {
    // Inside a tunnel to one host, a request for another is refused before anything is injected or sent.
    const misdirected = misdirection({ host, port: r.port }, r.heads.host, r.sni)
    if (misdirected) return Verdict.Refuse({ refusal: misdirectedRefusal({ host, port: r.port }, misdirected) })
  }
  if (r.upgrade && r.via === "plain") return refuse(400, "an upgrade over plain http:// is not relayed (a WebSocket goes over https://)", { why: "malformed", ...where })
  if (r.upgrade && r.heads.upgrade?.trim().toLowerCase() !== "websocket") {
    return refuse(400, "only a WebSocket upgrade is relayed (h2c and other protocols are not)", { why: "malformed", ...where })
  }
  const entry = entryFor(policy, where)
  if (entry instanceof Refusal) {
    // Inside a tunnel the entry was there when it opened: org.toml changed since, and the request is refused as is.
    if (r.via === "tls") return Verdict.Refuse({ refusal: entry })
    return holdOrRefuse(policy, caller, entry, { method: r.method, path: pathOnly(r.target) }, where, (e) => forwardAsSent(policy, e, r, where))
  }
  if (r.via === "plain" && entry.kind === "grant") return refuse(403, "credentials are injected only over TLS: use https://", { why: "tls_only", ...where })
  if (r.via === "tls" && entry.kind === "allow" && entry.rules === null) {
    // The tunnel was opened to be decided request by request: an allow without rules now would tunnel blind, a new connection's to do.
    return refuse(403, "the [[allow]] for this host no longer has request rules; reconnect", { why: "no_rule", ...where })
  }
  const dial = dialFor(policy, entry, host, r.port, r.via === "plain" ? "http:" : "https:")
  const itself = itselfOr(policy, dial, where)
  if (itself) return itself
  const decided = entry.rules === null ? forwardAsSent(policy, entry, r, where) : byRules(policy, caller, entry, r, where, dial)
  return decided._tag === "Forward" || decided._tag === "Hold" ? vetted(policy, r, decided) : decided
}

/** Why a [[grant]]'s body is read when no rule reads it. */
export const VETTED = "a [[grant]]'s model request is checked for provider-side tools before it leaves"

/**
 * A [[grant]]'s request body that may be a model request (JSON, text, or undeclared) is read whole and
 * checked before anything leaves — its provider-side tools, its JSON — and sent as checked (re-serialised:
 * the provider reads exactly what was checked). A held request is checked before a person is asked.
 */
const vetted = (policy: Policy, r: AskedRequest, v: Forward | Hold): Verdict => {
  const forward = v._tag === "Hold" ? v.then : v
  if (forward._tag !== "Forward" || !forward.inject || r.upgrade || !r.heads.hasBody || !isCheckedBody(r.method, r.heads.contentType)) return v
  const raw = forward.body?.raw ?? r.body?.raw
  if (raw === undefined) return Verdict.ReadBody({ limit: bodyLimitOf(policy), why: VETTED })
  const checked = checkBody(r.heads.contentType, raw, forward.inject)
  if ("refusal" in checked) return Verdict.Refuse({ refusal: checked.refusal })
  const sent = Verdict.Forward({ ...forward, body: { raw: checked.body, decoded: forward.body?.decoded ?? false, json: checked.json } })
  return v._tag === "Hold" ? Verdict.Hold({ ...v, then: sent }) : sent
}

const pathOnly = (target: string) => target.split("?")[0] ?? "/"

const itselfOr = (policy: Policy, dial: Dial, where: Where) => {
  const itself = itselfRefusal(policy, dial, where)
  return itself ? Verdict.Refuse({ refusal: itself }) : undefined
}

/** An entry without rules: the request goes as sent. */
const forwardAsSent = (policy: Policy, entry: PolicyEntry, r: AskedRequest, where: Where): Forward => {
  const dial = dialFor(policy, entry, where.host, where.port, r.via === "plain" ? "http:" : "https:")
  return Verdict.Forward({
    host: where.host, port: where.port, entry: entry.name, by: undefined, inject: injectOf(entry), dial, url: r.target, body: undefined, upgrade: r.upgrade
  })
}

const ambiguous = (entry: PolicyEntry, why: string, by: string, where: Where, status: 400 | 413 = 400) =>
  refuse(status, `the request has no single meaning: ${why} (${entry.name} decides by ${by})`, { why: status === 413 ? "malformed" : "ambiguous", ...where })

/** The lines that start a rule in this entry, for a fix an operator could paste. */
const ruleHead = (entry: PolicyEntry) => [`# a rule in the ${entry.kind === "grant" ? `[[grant]] named ${JSON.stringify(entry.grant?.name)}` : `[[allow]] for hosts = ${JSON.stringify(entry.hosts)}`}:`, `[[${entry.kind}.rules]]`]

/**
 * An entry's rules on a request: on its canonical path, after everything that could give it a second
 * meaning is refused; its body read first where a rule reads it or it could override its method. The first
 * rule that matches decides, else the entry's default; a JSON-RPC batch call by call, refused whole if any
 * call is, held if any is asked about. An upgrade is decided by websocket = true rules only.
 */
const byRules = (policy: Policy, caller: Caller, entry: PolicyEntry, r: AskedRequest, where: Where, dial: Dial): Verdict => {
  const rules = entry.rules
  if (rules === null) return forwardAsSent(policy, entry, r, where)
  const target = canonicalTarget(r.target)
  if (!target.ok) return ambiguous(entry, target.why, "path", where)
  const q = r.target.indexOf("?")
  const query = q < 0 ? "" : r.target.slice(q + 1)
  const head = headProblem(r.method, query, r.heads)
  if (head) return ambiguous(entry, head, "method and path", where)
  const candidates = candidatesFor(rules, r.method, segmentsOf(target.path), r.upgrade)
  const type = mediaType(r.heads.contentType)
  const readsBody = candidates.some((c) => c.readsBody)
  const needsBody = readsBody || mayOverride(r.method, type)
  if (needsBody && r.heads.hasBody && r.body === undefined) {
    return Verdict.ReadBody({ limit: bodyLimitOf(policy), why: readsBody ? "a rule reads its body" : "its body could override its method" })
  }
  // A body is read only where it decides: one given that no rule needs streams as sent, as it would have.
  let sent: SentBody | undefined
  if (needsBody && r.body !== undefined) {
    const decoded = decodeBody(r.body.raw, r.heads.contentEncoding, bodyLimitOf(policy))
    if (!decoded.ok) return ambiguous(entry, decoded.why, "body", where, decoded.status)
    sent = { raw: decoded.raw, decoded: r.heads.contentEncoding !== "" }
    const overrides = bodyProblem(r.method, { contentType: r.heads.contentType, raw: decoded.raw })
    if (overrides) return ambiguous(entry, overrides, "method", where)
  }
  const read = decideEach(candidates, r.upgrade ? "deny" : rules.fallback, r.method, query, sent && { contentType: r.heads.contentType, raw: sent.raw })
  if (!read.ok) return ambiguous(entry, read.why, read.by, where)
  const forward = Verdict.Forward({
    host: where.host, port: where.port, entry: entry.name, by: read.each[0]?.d.by ?? "", inject: injectOf(entry), dial, url: target.url, body: sent, upgrade: r.upgrade
  })
  const what = (x: DecidedCall) =>
    `${r.upgrade ? "a WebSocket upgrade on" : r.method} ${target.path}${x.call === undefined ? "" : ` (${read.calls > 1 ? `a batch of ${read.calls} calls: its call ` : "call "}${x.call})`}` +
    (read.graphql ? ` (GraphQL ${read.graphql})` : "")
  const refused = read.each.find((x) => x.d.action === "deny")
  if (refused) {
    // A deny rule says no on purpose; only a request no rule matched has lines that would allow it.
    const fixable = !refused.d.rule && refused.call === undefined && read.graphql === undefined
    const lines = r.upgrade ? [`paths = [${JSON.stringify(target.path)}]`, "websocket = true"] : [`methods = [${JSON.stringify(r.method)}]`, `paths = [${JSON.stringify(target.path)}]`]
    const by = r.upgrade && !refused.d.rule ? "(an upgrade is let through only by a rule that names it: websocket = true)" : refused.d.by
    return refuse(403, `${what(refused)} on ${where.host} is refused for ${where.subject} by ${entry.name} ${by}`, {
      why: "request_rule", ...where, ...(fixable ? { fix: [...ruleHead(entry), ...lines, `action = "allow"`] } : {})
    })
  }
  const asked = read.each.find((x) => x.d.action === "ask")
  if (!asked) return forward
  const refusal = new Refusal(403, `${what(asked)} on ${where.host} is held for a person by ${entry.name} ${asked.d.by}`, { why: "request_rule", ...where })
  // Only a run's request can wait for a person; a host-side caller's is refused.
  if (caller.runId === null || caller.worker === null) return Verdict.Refuse({ refusal })
  return Verdict.Hold({ refusal, asked: { method: r.method, path: target.path }, rule: `${entry.name} ${asked.d.by}`, host: where.host, port: where.port, then: forward })
}
