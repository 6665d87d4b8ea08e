import { Schema } from "effect"

/**
 * A grant's request rules ([[grant.rules]]): which requests inside its hosts it lets through with the
 * credential, which it holds for a person (`ask`: one approval lets that one request through), which it refuses. The first rule whose methods and paths both match decides; the grant's
 * `default` decides the rest (allow when it has no rules — as before rules existed — deny otherwise).
 *
 * A path pattern is matched against the request's canonical path (gateway/policy/canonicalPath.ts), one
 * segment at a time: a literal matches itself (case counts), `*` one non-empty segment, and `**`, as the
 * last segment only, everything under what comes before it (`/repos/acme/**` matches `/repos/acme/` and
 * `/repos/acme/x/y`, not `/repos/acme`). A method is matched as sent: `GET` never matches `get`.
 *
 * `case = "insensitive"` says the upstream ignores case on the rule's literal segments (GitHub's owner and
 * repository names): `/repos/acme/**` then matches `/repos/ACME/x` too. What `*` and `**` match is never
 * compared, so a ref, a SHA or a file path under `**` keeps its case; a rule whose literals go further
 * (`/repos/acme/app/contents/docs/**`) folds all of them — write two rules where only some should.
 */
export const RULE_ACTIONS = ["allow", "ask", "deny"] as const
export type RuleAction = typeof RULE_ACTIONS[number]

const Method = Schema.String.pipe(Schema.pattern(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,32}$/, {
  message: () => "a method is an HTTP method token as sent, e.g. \"GET\" or \"POST\""
}))
const PathPattern = Schema.String.pipe(Schema.maxLength(2048))
/** "query", "mutation" or "subscription", alone (every operation of that type) or with ":" and an operation name. */
const Operation = Schema.String.pipe(Schema.pattern(/^(query|mutation|subscription)(:[_A-Za-z][_0-9A-Za-z]*)?$/, {
  message: () => `an operation is "query", "mutation" or "subscription", or one with its name: "mutation:CreateIssue"`
}))
/** A JSON-RPC method ("tools/list"), or MCP's tools/call with the tool's name ("tools/call:write_file"). */
const Call = Schema.String.pipe(Schema.pattern(/^[^\s:]{1,128}(:[^\s]{1,128})?$/, {
  message: () => `a call is a JSON-RPC method ("tools/list"), or "tools/call:<tool>" for an MCP tool`
}))

const RuleFields = Schema.Struct({
  /** The methods it matches, as sent; absent: every method. */
  methods: Schema.optional(Schema.NonEmptyArray(Method)),
  /** The paths it matches; absent: every path. */
  paths: Schema.optional(Schema.NonEmptyArray(PathPattern)),
  /** A GraphQL endpoint: the rule matches by the document's one operation (`operations`; absent: every one). */
  graphql: Schema.optional(Schema.Boolean),
  operations: Schema.optional(Schema.NonEmptyArray(Operation)),
  /** A JSON-RPC endpoint (an MCP server over HTTP): the rule matches call by call (`calls`; absent: every call). */
  jsonrpc: Schema.optional(Schema.Boolean),
  calls: Schema.optional(Schema.NonEmptyArray(Call)),
  /**
   * A WebSocket upgrade on its paths: such a rule matches only an upgrade, and an upgrade only such a
   * rule — past the handshake the frames are no request any rule could decide, so an entry with rules
   * lets one through only where a rule names it (its default never does).
   */
  websocket: Schema.optional(Schema.Boolean),
  /** Whether the rule's literal path segments match without regard to case (the upstream ignores it there). */
  case: Schema.optional(Schema.Literal("sensitive", "insensitive")),
  action: Schema.Literal(...RULE_ACTIONS)
})

// What a rule reads of a body is said by the rule's own switch: operations without graphql = true would match nothing.
export const RequestRule = RuleFields.pipe(Schema.filter((r) =>
  r.graphql === true && r.jsonrpc === true ? "a rule is graphql = true or jsonrpc = true, not both (one endpoint speaks one)"
    : r.operations !== undefined && r.graphql !== true ? "operations apply to a rule with graphql = true: add it"
    : r.calls !== undefined && r.jsonrpc !== true ? "calls apply to a rule with jsonrpc = true: add it"
    : r.websocket === true && (r.graphql === true || r.jsonrpc === true) ? "a websocket = true rule reads no body: it matches the upgrade by its path only (drop graphql/jsonrpc)"
    : r.websocket === true && r.methods !== undefined ? "a WebSocket upgrade is a GET: a websocket = true rule takes paths, not methods (drop methods)"
    : r.case !== undefined && r.paths === undefined ? "case applies to a rule's paths: add paths (without them the rule matches every path, whatever its case)"
    : true
))
export type RequestRule = typeof RequestRule.Type

/** Whether a rule reads the request's body (GraphQL or JSON-RPC) to decide. */
export const readsBody = (r: RequestRule) => r.graphql === true || r.jsonrpc === true

/** Does operation pattern `outer` match every operation `inner` matches? ("mutation" covers "mutation:X".) */
const operationCovers = (outer: string, inner: string) => outer === inner || (!outer.includes(":") && inner.startsWith(`${outer}:`))
/** Does call pattern `outer` match every call `inner` matches? ("tools/call" covers "tools/call:x".) */
const callCovers = operationCovers

const listCovers = (outer: ReadonlyArray<string> | undefined, inner: ReadonlyArray<string> | undefined, covers: (o: string, i: string) => boolean) =>
  outer === undefined || (inner !== undefined && inner.every((i) => outer.some((o) => covers(o, i))))

/** Does `outer` match every body `inner` matches? A rule that reads no body matches them all. */
const bodyCovers = (outer: RequestRule, inner: RequestRule) =>
  (outer.websocket === true) !== (inner.websocket === true) ? false
    : outer.graphql === true ? inner.graphql === true && listCovers(outer.operations, inner.operations, operationCovers)
    : outer.jsonrpc === true ? inner.jsonrpc === true && listCovers(outer.calls, inner.calls, callCovers)
    : true

/** A path pattern split into segments: `/a/*\/b` → ["a", "*", "b"]; `/` → [""]. */
export const segmentsOf = (path: string): ReadonlyArray<string> => path.slice(1).split("/")

/** Whether a rule's literal segments match without regard to case. */
export const foldsCase = (r: RequestRule) => r.case === "insensitive"

/** One form of a segment a case-insensitive rule compares. */
export const foldSegment = (s: string) => s.toLowerCase()

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
export const patternCovers = (outer: string, inner: string, fold: { readonly outer: boolean; readonly inner: boolean } = NO_FOLD): boolean => {
  const o = segmentsOf(outer)
  const n = segmentsOf(inner)
  for (let i = 0; i < o.length; i++) {
    const seg = o[i] as string
    if (seg === "**") return n.length > i
    const other = n[i]
    if (other === undefined || other === "**") return false
    if (seg === "*" ? other === "" : !literalCovers(seg, other, fold)) return false
  }
  return n.length === o.length
}

const NO_FOLD = { outer: false, inner: false } as const

/**
 * Does literal `outer` match every segment literal (or `*`) `inner` matches? A case-insensitive inner
 * matches every casing of itself, which a case-sensitive outer covers only when the segment has no case.
 */
const literalCovers = (outer: string, inner: string, fold: { readonly outer: boolean; readonly inner: boolean }) => {
  if (inner === "*") return false
  if (fold.outer) return foldSegment(outer) === foldSegment(inner)
  return outer === inner && (!fold.inner || inner.toUpperCase() === inner.toLowerCase())
}

/** Can one request path match both patterns, their literals compared without regard to case? */
export const patternsOverlap = (a: string, b: string): boolean => {
  const x = segmentsOf(a)
  const y = segmentsOf(b)
  for (let i = 0; ; i++) {
    const p = x[i]
    const q = y[i]
    if (p === undefined || q === undefined) return p === q
    // "**" matches one segment or more: whatever the other has from here, if it has anything.
    if (p === "**" || q === "**") return true
    if (p === "*" || q === "*") {
      if ((p === "*" ? q : p) === "") return false
      continue
    }
    if (foldSegment(p) !== foldSegment(q)) return false
  }
}

const methodsCover = (outer: RequestRule, inner: RequestRule) =>
  outer.methods === undefined || (inner.methods !== undefined && inner.methods.every((m) => outer.methods?.includes(m)))

const pathsCover = (outer: RequestRule, inner: RequestRule) =>
  outer.paths === undefined ||
  (inner.paths !== undefined && inner.paths.every((p) => outer.paths?.some((q) => patternCovers(q, p, { outer: foldsCase(outer), inner: foldsCase(inner) }))))

const methodsMeet = (a: RequestRule, b: RequestRule) =>
  a.methods === undefined || b.methods === undefined || a.methods.some((m) => b.methods?.includes(m))

/** Do two rules both match some request, their paths compared without regard to case? */
const rulesMeet = (a: RequestRule, b: RequestRule) =>
  (a.websocket === true) === (b.websocket === true) && methodsMeet(a, b) &&
  (a.paths === undefined || b.paths === undefined || a.paths.some((p) => b.paths?.some((q) => patternsOverlap(p, q))))

/** How a rule reads in an error, a refusal or a check: its index (from 1) and its lines. */
export const describeRule = (rule: RequestRule, index: number) =>
  `rule ${index + 1} (${[
    ...(rule.methods ? [`methods = ${JSON.stringify(rule.methods)}`] : []),
    ...(rule.paths ? [`paths = ${JSON.stringify(rule.paths)}`] : []),
    ...(rule.graphql ? ["graphql = true"] : []),
    ...(rule.operations ? [`operations = ${JSON.stringify(rule.operations)}`] : []),
    ...(rule.jsonrpc ? ["jsonrpc = true"] : []),
    ...(rule.calls ? [`calls = ${JSON.stringify(rule.calls)}`] : []),
    ...(rule.websocket ? ["websocket = true"] : []),
    ...(rule.case ? [`case = "${rule.case}"`] : []),
    `action = "${rule.action}"`
  ].join(", ")})`

/**
 * The first problem of a grant's rules, or undefined: a path that can never match, or a rule that can
 * never decide because one before it matches everything it matches (first match wins) — each with the fix.
 */
export const rulesProblem = (rules: ReadonlyArray<RequestRule>, fallback?: RuleAction): { readonly index: number; readonly message: string } | undefined => {
  for (const [i, rule] of rules.entries()) {
    for (const p of rule.paths ?? []) {
      const problem = patternProblem(p)
      if (problem) return { index: i, message: `${describeRule(rule, i)}: path ${JSON.stringify(p)} can never match — ${problem}` }
    }
    const before = rules.slice(0, i).findIndex((r) => methodsCover(r, rule) && pathsCover(r, rule) && bodyCovers(r, rule))
    if (before >= 0) {
      return {
        index: i,
        message: `${describeRule(rule, i)} never decides: ${describeRule(rules[before] as RequestRule, before)} matches every request it matches, ` +
          "and the first rule that matches decides — move it above, narrow the earlier one, or remove it"
      }
    }
    const dodged = caseDodge(rules, i, fallback ?? (rules.length === 0 ? "allow" : "deny"))
    if (dodged) return { index: i, message: dodged }
  }
  return undefined
}

/**
 * Why a rule that refuses or asks could be passed by a change of case, or undefined: it counts case, and a
 * later rule that allows says the upstream ignores case on paths the two share — so `/repos/ACME/secret`
 * skips the deny and is allowed by the later rule, and the upstream serves `/repos/acme/secret`. The same
 * when the entry's default allows and any of its rules says the upstream ignores case.
 */
const caseDodge = (rules: ReadonlyArray<RequestRule>, i: number, fallback: RuleAction): string | undefined => {
  const rule = rules[i] as RequestRule
  if (rule.action === "allow" || foldsCase(rule) || rule.paths === undefined) return undefined
  const fix = `add case = "insensitive" to ${describeRule(rule, i).split(" (")[0]}, or a request that changes the case of a path gets past it`
  const later = rules.findIndex((r, j) => j > i && r.action === "allow" && foldsCase(r) && rulesMeet(rule, r))
  if (later >= 0) {
    return `${describeRule(rule, i)} counts case, but ${describeRule(rules[later] as RequestRule, later)} says the upstream ignores it on paths they share: ${fix}`
  }
  const folding = rules.findIndex(foldsCase)
  if (fallback === "allow" && folding >= 0) {
    return `${describeRule(rule, i)} counts case, but ${describeRule(rules[folding] as RequestRule, folding)} says the upstream ignores it and the default allows the rest: ${fix}`
  }
  return undefined
}
