import { Schema } from "effect"

/**
 * A grant's request rules ([[grant.rules]]): which requests inside its hosts it lets through with the
 * credential, which it holds for a person (`ask`: one approval lets that one request through), which it refuses. The first rule whose methods and paths both match decides; the grant's
 * `default` decides the rest (allow when it has no rules — as before rules existed — deny otherwise).
 *
 * A path pattern is matched against the request's canonical path (gateway/base/canonicalPath.ts), one
 * segment at a time: a literal matches itself (case counts), `*` one non-empty segment, and `**`, as the
 * last segment only, everything under what comes before it (`/repos/acme/**` matches `/repos/acme/` and
 * `/repos/acme/x/y`, not `/repos/acme`). A method is matched as sent: `GET` never matches `get`.
 */
export const RULE_ACTIONS = ["allow", "ask", "deny"] as const
export type RuleAction = typeof RULE_ACTIONS[number]

const Method = Schema.String.pipe(Schema.pattern(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,32}$/, {
  message: () => "a method is an HTTP method token as sent, e.g. \"GET\" or \"POST\""
}))
const PathPattern = Schema.String.pipe(Schema.maxLength(2048))

export const RequestRule = Schema.Struct({
  /** The methods it matches, as sent; absent: every method. */
  methods: Schema.optional(Schema.NonEmptyArray(Method)),
  /** The paths it matches; absent: every path. */
  paths: Schema.optional(Schema.NonEmptyArray(PathPattern)),
  action: Schema.Literal(...RULE_ACTIONS)
})
export type RequestRule = typeof RequestRule.Type

/** A path pattern split into segments: `/a/*\/b` → ["a", "*", "b"]; `/` → [""]. */
export const segmentsOf = (path: string): ReadonlyArray<string> => path.slice(1).split("/")

/** What is wrong with a path pattern, or undefined: one that can never match a canonical path is refused. */
export const patternProblem = (pattern: string): string | undefined => {
  if (!pattern.startsWith("/")) return `a path starts with "/" (it is matched against the request's path, without the query)`
  if (/[?#]/.test(pattern)) return "a path has no query or fragment: the query is not part of the path a rule sees"
  if (pattern.includes("%")) return "a path is written decoded (the gateway decodes a request's path once before matching)"
  const segments = segmentsOf(pattern)
  for (const [i, s] of segments.entries()) {
    if (s === "." || s === "..") return `"${s}" never appears in a canonical path (the gateway resolves dot-segments before matching)`
    if (s === "" && i < segments.length - 1) return `"//" never appears in a canonical path (the gateway folds repeated slashes)`
    if (s === "**" && i < segments.length - 1) return `"**" is allowed only as the last segment (as in "/repos/acme/**")`
    if (s !== "*" && s !== "**" && s.includes("*")) return `"*" stands for a whole segment ("/a/*/b"), not part of one`
  }
  return undefined
}

/**
 * Does `outer` match every path `inner` matches? Segment by segment: a `**` covers all that is left
 * (at least one segment), `*` covers any one non-empty segment (a literal or another `*`), a literal only itself.
 */
export const patternCovers = (outer: string, inner: string): boolean => {
  const o = segmentsOf(outer)
  const n = segmentsOf(inner)
  for (let i = 0; i < o.length; i++) {
    const seg = o[i] as string
    if (seg === "**") return n.length > i
    const other = n[i]
    if (other === undefined || other === "**") return false
    if (seg === "*" ? other === "" : seg !== other) return false
  }
  return n.length === o.length
}

const methodsCover = (outer: RequestRule, inner: RequestRule) =>
  outer.methods === undefined || (inner.methods !== undefined && inner.methods.every((m) => outer.methods?.includes(m)))

const pathsCover = (outer: RequestRule, inner: RequestRule) =>
  outer.paths === undefined || (inner.paths !== undefined && inner.paths.every((p) => outer.paths?.some((q) => patternCovers(q, p))))

/** How a rule reads in an error, a refusal or a check: its index (from 1) and its lines. */
export const describeRule = (rule: RequestRule, index: number) =>
  `rule ${index + 1} (${[
    ...(rule.methods ? [`methods = ${JSON.stringify(rule.methods)}`] : []),
    ...(rule.paths ? [`paths = ${JSON.stringify(rule.paths)}`] : []),
    `action = "${rule.action}"`
  ].join(", ")})`

/**
 * The first problem of a grant's rules, or undefined: a path that can never match, or a rule that can
 * never decide because one before it matches everything it matches (first match wins) — each with the fix.
 */
export const rulesProblem = (rules: ReadonlyArray<RequestRule>): { readonly index: number; readonly message: string } | undefined => {
  for (const [i, rule] of rules.entries()) {
    for (const p of rule.paths ?? []) {
      const problem = patternProblem(p)
      if (problem) return { index: i, message: `${describeRule(rule, i)}: path ${JSON.stringify(p)} can never match — ${problem}` }
    }
    const before = rules.slice(0, i).findIndex((r) => methodsCover(r, rule) && pathsCover(r, rule))
    if (before >= 0) {
      return {
        index: i,
        message: `${describeRule(rule, i)} never decides: ${describeRule(rules[before] as RequestRule, before)} matches every request it matches, ` +
          "and the first rule that matches decides — move it above, narrow the earlier one, or remove it"
      }
    }
  }
  return undefined
}
