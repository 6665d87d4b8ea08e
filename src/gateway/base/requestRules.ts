import { describeRule, type RequestRule, type RuleAction, segmentsOf } from "../../config/requestRule.js"
import type { GrantRule } from "../../config/schema.js"
import { canonicalTarget } from "./canonicalPath.js"
import { Refusal } from "./refusal.js"

interface Compiled {
  readonly rules: ReadonlyArray<{
    readonly methods: ReadonlySet<string> | undefined
    readonly paths: ReadonlyArray<ReadonlyArray<string>> | undefined
    readonly action: RuleAction
    readonly text: string
  }>
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
      action: r.action,
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

/** What a grant's rules make of one request: the URL to send (canonical when it has rules), or the refusal. */
export type RuledRequest =
  | { readonly ok: true; readonly url: string; readonly by?: string }
  /** Refused; or, with `ask`, held for a person first — `refusal` is its answer unless one approves it. */
  | { readonly ok: false; readonly refusal: Refusal; readonly ask?: { readonly rule: string; readonly method: string; readonly path: string; readonly url: string } }

/** Whether the grant decides request by request (it has rules or a default of deny). */
export const hasRules = (grant: GrantRule) => compile(grant) !== null

/**
 * The grant's decision for `method url`: the first rule whose methods and paths match, else its default.
 * A refusal names the grant and the rule that decided (or its default), and what an operator could add.
 */
export const ruleRequest = (grant: GrantRule, method: string, url: string, where: { readonly host: string; readonly port: number; readonly subject: string }): RuledRequest => {
  const rules = compile(grant)
  if (rules === null) return { ok: true, url }
  const target = canonicalTarget(url)
  if (!target.ok) {
    return { ok: false, refusal: new Refusal(400, `the request's path has no single meaning: ${target.why} ([[grant]] "${grant.name}" decides by path)`, { why: "malformed", ...where }) }
  }
  const segments = segmentsOf(target.path)
  const rule = rules.rules.find((r) => (r.methods === undefined || r.methods.has(method)) && (r.paths === undefined || r.paths.some((p) => matches(p, segments))))
  const action = rule?.action ?? rules.fallback
  const by = rule ? rule.text : `its default (${rules.fallback}: no rule matched)`
  if (action === "allow") return { ok: true, url: target.url, by }
  const asked = `${method} ${target.path}`
  if (action === "ask") {
    return {
      ok: false,
      refusal: new Refusal(403, `${asked} on ${where.host} is held for a person by [[grant]] ${JSON.stringify(grant.name)} ${by}`, { why: "request_rule", ...where }),
      ask: { rule: `[[grant]] ${JSON.stringify(grant.name)} ${by}`, method, path: target.path, url: target.url }
    }
  }
  return {
    ok: false,
    refusal: new Refusal(403, `${asked} on ${where.host} is refused for ${where.subject} by [[grant]] ${JSON.stringify(grant.name)} ${by}`, {
      why: "request_rule", ...where,
      // A deny rule says no on purpose; only a request no rule matched has lines that would allow it.
      ...(rule ? {} : { fix: [`# a rule in the [[grant]] named ${JSON.stringify(grant.name)}:`, "[[grant.rules]]", `methods = [${JSON.stringify(method)}]`, `paths = [${JSON.stringify(target.path)}]`, `action = "allow"`] })
    })
  }
}
