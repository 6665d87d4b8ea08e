import { describeRule, readsBody, type RequestRule, type RuleAction, segmentsOf } from "../../config/requestRule.js"
import type { AllowRule, GrantRule } from "../../config/schema.js"
import { graphqlOf, jsonrpcCallsOf, type Read } from "./bodyCalls.js"
import { canonicalTarget } from "./canonicalPath.js"
import type { GraphqlOperation } from "./graphqlOperation.js"
import { Refusal } from "./refusal.js"

interface CompiledRule {
  readonly methods: ReadonlySet<string> | undefined
  readonly paths: ReadonlyArray<ReadonlyArray<string>> | undefined
  readonly rule: RequestRule
  readonly text: string
}

interface Compiled {
  readonly rules: ReadonlyArray<CompiledRule>
  readonly fallback: RuleAction
  /** The candidates of requests seen lately, by kind, method and canonical path: a box repeats its requests. */
  readonly seen: Map<string, ReadonlyArray<CompiledRule>>
}

/** How many (method, path) pairs an entry remembers the candidates of, and the longest path it keeps. */
const SEEN_MAX = 256
const SEEN_PATH_MAX = 512

/** An org.toml entry that may carry request rules: a [[grant]] (its credential goes only with what they allow) or an [[allow]]. */
export type RuledEntry = GrantRule | AllowRule

const isGrant = (entry: RuledEntry): entry is GrantRule => "credential" in entry

/** How an entry is named in a refusal, a card or a check: `[[grant]] "github"`, `[[allow]] hosts = ["example.com"]`. */
export const entryName = (entry: RuledEntry) =>
  isGrant(entry) ? `[[grant]] ${JSON.stringify(entry.name)}` : `[[allow]] hosts = ${JSON.stringify(entry.hosts)}`

/** The lines that start a rule in this entry, for a fix an operator could paste. */
const ruleHead = (entry: RuledEntry) =>
  isGrant(entry)
    ? [`# a rule in the [[grant]] named ${JSON.stringify(entry.name)}:`, "[[grant.rules]]"]
    : [`# a rule in the [[allow]] for hosts = ${JSON.stringify(entry.hosts)}:`, "[[allow.rules]]"]

// Compiled once per entry as org.toml was read (a reload decodes new entry objects), never per request.
const compiled = new WeakMap<RuledEntry, Compiled | null>()

/** An entry's rules, compiled; null when it has none and allows every request (as entries did before rules). */
const compile = (grant: RuledEntry): Compiled | null => {
  const have = compiled.get(grant)
  if (have !== undefined) return have
  const rules = grant.rules ?? []
  const fallback = grant.default ?? (rules.length === 0 ? "allow" : "deny")
  const made = rules.length === 0 && fallback === "allow" ? null : {
    rules: rules.map((r: RequestRule, i) => ({
      methods: r.methods ? new Set(r.methods) : undefined,
      paths: r.paths?.map(segmentsOf),
      rule: r,
      text: describeRule(r, i)
    })),
    fallback,
    seen: new Map()
  }
  compiled.set(grant, made)
  return made
}

/** Does a compiled pattern match a canonical path's segments? (config/requestRule.ts says how.) */
const matches = (pattern: ReadonlyArray<string>, path: ReadonlyArray<string>) => {
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i] as string
    if (p === "**") return path.length > i
    const s = path[i]
    if (s === undefined || (p === "*" ? s === "" : p !== s)) return false
  }
  return path.length === pattern.length
}

/** The rules whose kind (an upgrade or not), method and paths match, in order: plain loops, as this runs on every request. */
const candidatesFor = (rules: ReadonlyArray<CompiledRule>, method: string, segments: ReadonlyArray<string>, upgrade: boolean) => {
  const out: Array<CompiledRule> = []
  for (const r of rules) {
    if ((r.rule.websocket === true) !== upgrade || (r.methods !== undefined && !r.methods.has(method))) continue
    if (r.paths === undefined) {
      out.push(r)
      continue
    }
    for (const p of r.paths) {
      if (matches(p, segments)) {
        out.push(r)
        break
      }
    }
  }
  return out
}

/** `candidatesFor`, remembered for the entry's recent requests (forgotten all at once when full: no unbounded growth from a box's paths). */
const seenCandidates = (rules: Compiled, method: string, path: string, upgrade: boolean) => {
  if (path.length > SEEN_PATH_MAX) return candidatesFor(rules.rules, method, segmentsOf(path), upgrade)
  const key = `${upgrade ? "ws" : "http"} ${method} ${path}`
  const have = rules.seen.get(key)
  if (have) return have
  const found = candidatesFor(rules.rules, method, segmentsOf(path), upgrade)
  if (rules.seen.size >= SEEN_MAX) rules.seen.clear()
  rules.seen.set(key, found)
  return found
}

/** "mutation" matches every mutation, "mutation:CreateIssue" that one; "tools/call" every tool, "tools/call:x" that one. */
const named = (pattern: string, what: string) => pattern === what || (!pattern.includes(":") && what.startsWith(`${pattern}:`))
const operationText = (op: Extract<GraphqlOperation, { ok: true }>) => (op.name ? `${op.type}:${op.name}` : op.type)

/** The body a rule may need: its content type and bytes, read whole (bounded by max_body_mib). */
export interface RequestBody {
  readonly contentType: string
  readonly raw: Buffer
}

type Ask = { readonly rule: string; readonly method: string; readonly path: string; readonly url: string }

/** What an entry's rules make of one request: the URL to send (canonical when it has rules), or the refusal. */
export type RuledRequest =
  | { readonly ok: true; readonly url: string; readonly by?: string }
  /**
   * Refused; with `ask`, held for a person first (`refusal` is its answer unless one approves it); with
   * `needsBody`, not decided until its body is read (a GraphQL or JSON-RPC rule matches its method and path).
   */
  | { readonly ok: false; readonly refusal: Refusal; readonly ask?: Ask; readonly needsBody?: true }

/** Whether the entry decides request by request (it has rules or a default of deny). */
export const hasRules = (entry: RuledEntry) => compile(entry) !== null

type Where = { readonly host: string; readonly port: number; readonly subject: string }
type Decided = { readonly action: RuleAction; readonly by: string; readonly rule?: CompiledRule } | { readonly unread: string }

/**
 * The entry's decision for `method url` (and, where a GraphQL or JSON-RPC rule asks, its body): the first
 * rule that matches, else its default; a JSON-RPC batch call by call, refused whole if any call is, held if
 * any is asked about. A WebSocket upgrade is decided by websocket = true rules only, and refused when none
 * matches: a REST grant is never turned into a tunnel by its default. A refusal names the entry and the rule
 * that decided (or its default, with the rule an operator could add); what has no single meaning — a path, a
 * document, a body — is refused, never guessed.
 */
export const ruleRequest = (entry: RuledEntry, method: string, url: string, where: Where, body?: RequestBody, upgrade = false): RuledRequest => {
  const rules = compile(entry)
  if (rules === null) return { ok: true, url }
  const target = canonicalTarget(url)
  const name = entryName(entry)
  if (!target.ok) return malformed(name, target.why, "path", where)
  const candidates = seenCandidates(rules, method, target.path, upgrade)
  if (body === undefined && candidates.some((r) => readsBody(r.rule))) {
    return { ok: false, needsBody: true, refusal: new Refusal(400, "the request's body decides it", { why: "malformed", ...where }) }
  }
  const read = decideEach(candidates, upgrade ? "deny" : rules.fallback, method, url, body)
  if (!read.ok) return malformed(name, read.why, read.by, where)
  const { calls, each, graphql } = read
  const what = (x: DecidedCall) =>
    `${upgrade ? "a WebSocket upgrade on" : method} ${target.path}${x.call === undefined ? "" : ` (${calls > 1 ? `a batch of ${calls} calls: its call ` : "call "}${x.call})`}` +
    (graphql ? ` (GraphQL ${graphql})` : "")
  const refused = each.find((x) => x.d.action === "deny")
  if (refused) {
    // A deny rule says no on purpose; only a request no rule matched has lines that would allow it.
    const fixable = !refused.d.rule && refused.call === undefined && graphql === undefined
    const lines = upgrade ? [`paths = [${JSON.stringify(target.path)}]`, "websocket = true"] : [`methods = [${JSON.stringify(method)}]`, `paths = [${JSON.stringify(target.path)}]`]
    const by = upgrade && !refused.d.rule ? "(an upgrade is let through only by a rule that names it: websocket = true)" : refused.d.by
    return {
      ok: false,
      refusal: new Refusal(403, `${what(refused)} on ${where.host} is refused for ${where.subject} by ${name} ${by}`, {
        why: "request_rule", ...where, ...(fixable ? { fix: [...ruleHead(entry), ...lines, `action = "allow"`] } : {})
      })
    }
  }
  const asked = each.find((x) => x.d.action === "ask")
  if (asked) {
    return {
      ok: false,
      refusal: new Refusal(403, `${what(asked)} on ${where.host} is held for a person by ${name} ${asked.d.by}`, { why: "request_rule", ...where }),
      ask: { rule: `${name} ${asked.d.by}`, method, path: target.path, url: target.url }
    }
  }
  return { ok: true, url: target.url, by: each[0]?.d.by ?? "" }
}

const malformed = (name: string, why: string, by: string, where: Where) =>
  ({ ok: false, refusal: new Refusal(400, `the request has no single meaning: ${why} (${name} decides by ${by})`, { why: "malformed", ...where }) }) as const

type Decision = Extract<Decided, { action: RuleAction }>
type DecidedCall = { readonly call: string | undefined; readonly d: Decision }

/**
 * Each call of the request decided by the first candidate that matches it, else `fallback`: one call for a
 * plain request, one per JSON-RPC call of a batch. The GraphQL operation is read once, and only for a rule
 * that asks: a request no GraphQL rule reaches is never parsed as one.
 */
const decideEach = (candidates: ReadonlyArray<CompiledRule>, fallback: RuleAction, method: string, url: string, body: RequestBody | undefined):
  | { readonly ok: true; readonly calls: number; readonly each: ReadonlyArray<DecidedCall>; readonly graphql: string | undefined }
  | { readonly ok: false; readonly why: string; readonly by: string } =>
{
  let graphql: Read<Extract<GraphqlOperation, { ok: true }>> | undefined
  const operation = () => (graphql ??= graphqlOf(method, url, body?.contentType ?? "", body?.raw ?? Buffer.alloc(0)))
  const decide = (call: string | undefined): Decided => {
    for (const r of candidates) {
      if (r.rule.graphql) {
        const op = operation()
        if (!op.ok) return { unread: op.why }
        if (r.rule.operations && !r.rule.operations.some((p) => named(p, operationText(op.value)))) continue
      }
      if (r.rule.jsonrpc && r.rule.calls && !(call !== undefined && r.rule.calls.some((p) => named(p, call)))) continue
      return { action: r.rule.action, by: r.text, rule: r }
    }
    return { action: fallback, by: `its default (${fallback}: no rule matched)` }
  }
  let calls: ReadonlyArray<string | undefined> = [undefined]
  if (candidates.some((r) => r.rule.jsonrpc)) {
    const read = jsonrpcCallsOf(body?.raw ?? Buffer.alloc(0))
    if (!read.ok) return { ok: false, why: read.why, by: "JSON-RPC call" }
    calls = read.value
  }
  const each: Array<DecidedCall> = []
  for (const call of calls) {
    const d = decide(call)
    if ("unread" in d) return { ok: false, why: d.unread, by: "GraphQL operation" }
    each.push({ call, d })
  }
  const op = graphql as Read<Extract<GraphqlOperation, { ok: true }>> | undefined
  return { ok: true, calls: calls.length, each, graphql: op?.ok ? operationText(op.value) : undefined }
}
