import { describeRule, readsBody, type RequestRule, type RuleAction, segmentsOf } from "../../config/requestRule.js"
import type { GrantRule } from "../../config/schema.js"
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
}

// Compiled once per grant as org.toml was read (a reload decodes new grant objects), never per request.
const compiled = new WeakMap<GrantRule, Compiled | null>()

/** A grant's rules, compiled; null when it has none and allows every request (as grants did before rules). */
const compile = (grant: GrantRule): Compiled | null => {
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
    fallback
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

/** "mutation" matches every mutation, "mutation:CreateIssue" that one; "tools/call" every tool, "tools/call:x" that one. */
const named = (pattern: string, what: string) => pattern === what || (!pattern.includes(":") && what.startsWith(`${pattern}:`))
const operationText = (op: Extract<GraphqlOperation, { ok: true }>) => (op.name ? `${op.type}:${op.name}` : op.type)

/** The body a rule may need: its content type and bytes, read whole (bounded by max_body_mib). */
export interface RequestBody {
  readonly contentType: string
  readonly raw: Buffer
}

type Ask = { readonly rule: string; readonly method: string; readonly path: string; readonly url: string }

/** What a grant's rules make of one request: the URL to send (canonical when it has rules), or the refusal. */
export type RuledRequest =
  | { readonly ok: true; readonly url: string; readonly by?: string }
  /**
   * Refused; with `ask`, held for a person first (`refusal` is its answer unless one approves it); with
   * `needsBody`, not decided until its body is read (a GraphQL or JSON-RPC rule matches its method and path).
   */
  | { readonly ok: false; readonly refusal: Refusal; readonly ask?: Ask; readonly needsBody?: true }

/** Whether the grant decides request by request (it has rules or a default of deny). */
export const hasRules = (grant: GrantRule) => compile(grant) !== null

type Where = { readonly host: string; readonly port: number; readonly subject: string }
type Decided = { readonly action: RuleAction; readonly by: string; readonly rule?: CompiledRule } | { readonly unread: string }

/**
 * The grant's decision for `method url` (and, where a GraphQL or JSON-RPC rule asks, its body): the first
 * rule that matches, else its default; a JSON-RPC batch call by call, refused whole if any call is, held if
 * any is asked about. A refusal names the grant and the rule that decided (or its default, with the rule
 * an operator could add); what has no single meaning — a path, a document, a body — is refused, never guessed.
 */
export const ruleRequest = (grant: GrantRule, method: string, url: string, where: Where, body?: RequestBody): RuledRequest => {
  const rules = compile(grant)
  if (rules === null) return { ok: true, url }
  const target = canonicalTarget(url)
  const malformed = (why: string, by: string) =>
    ({ ok: false, refusal: new Refusal(400, `the request has no single meaning: ${why} ([[grant]] ${JSON.stringify(grant.name)} decides by ${by})`, { why: "malformed", ...where }) }) as const
  if (!target.ok) return malformed(target.why, "path")
  const segments = segmentsOf(target.path)
  const candidates = rules.rules.filter((r) => (r.methods === undefined || r.methods.has(method)) && (r.paths === undefined || r.paths.some((p) => matches(p, segments))))
  if (body === undefined && candidates.some((r) => readsBody(r.rule))) {
    return { ok: false, needsBody: true, refusal: new Refusal(400, "the request's body decides it", { why: "malformed", ...where }) }
  }
  // Read once, and only for a rule that asks: a request no GraphQL rule reaches is never parsed as one.
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
    return { action: rules.fallback, by: `its default (${rules.fallback}: no rule matched)` }
  }
  let calls: ReadonlyArray<string | undefined> = [undefined]
  if (candidates.some((r) => r.rule.jsonrpc)) {
    const read = jsonrpcCallsOf(body?.raw ?? Buffer.alloc(0))
    if (!read.ok) return malformed(read.why, "JSON-RPC call")
    calls = read.value
  }
  const decided = calls.map((call) => ({ call, d: decide(call) }))
  const unread = decided.find((x): x is { call: string | undefined; d: { unread: string } } => "unread" in x.d)
  if (unread) return malformed(unread.d.unread, "GraphQL operation")
  const each = decided as ReadonlyArray<{ readonly call: string | undefined; readonly d: Extract<Decided, { action: RuleAction }> }>
  const what = (x: typeof each[number]) =>
    `${method} ${target.path}${x.call === undefined ? "" : ` (${calls.length > 1 ? `a batch of ${calls.length} calls: its call ` : "call "}${x.call})`}` +
    (graphql?.ok ? ` (GraphQL ${operationText(graphql.value)})` : "")
  const refused = each.find((x) => x.d.action === "deny")
  if (refused) {
    return {
      ok: false,
      refusal: new Refusal(403, `${what(refused)} on ${where.host} is refused for ${where.subject} by [[grant]] ${JSON.stringify(grant.name)} ${refused.d.by}`, {
        why: "request_rule", ...where,
        // A deny rule says no on purpose; only a request no rule matched has lines that would allow it.
        ...(refused.d.rule || refused.call !== undefined || graphql !== undefined ? {} : {
          fix: [`# a rule in the [[grant]] named ${JSON.stringify(grant.name)}:`, "[[grant.rules]]", `methods = [${JSON.stringify(method)}]`, `paths = [${JSON.stringify(target.path)}]`, `action = "allow"`]
        })
      })
    }
  }
  const asked = each.find((x) => x.d.action === "ask")
  if (asked) {
    return {
      ok: false,
      refusal: new Refusal(403, `${what(asked)} on ${where.host} is held for a person by [[grant]] ${JSON.stringify(grant.name)} ${asked.d.by}`, { why: "request_rule", ...where }),
      ask: { rule: `[[grant]] ${JSON.stringify(grant.name)} ${asked.d.by}`, method, path: target.path, url: target.url }
    }
  }
  return { ok: true, url: target.url, by: each[0]?.d.by ?? "" }
}
