import * as net from "node:net"
import { normalizeHost } from "./hosts.js"
import { describeRule, foldsCase, foldSegment, readsBody, type RequestRule, type RuleAction, segmentsOf } from "./requestRule.js"
import type { AllowRule, GrantRule, Org } from "./schema.js"

/**
 * org.toml's egress policy compiled once, as the file is decoded (OrgConfig keeps it beside the decoded
 * file): each [[grant]] and [[allow]] with its hosts normalised, its ports, and its request rules as
 * matchers; each [[route]] as the upstream it names. The gateway's one decision
 * (gateway/policy/decide.ts) reads this and nothing else of org.toml's egress sections.
 */
export interface Policy {
  readonly org: Org
  /** Every [[grant]], then every [[allow]], in file order: a grant wins over an allow for the same host. */
  readonly entries: ReadonlyArray<PolicyEntry>
  /** Each [[route]]'s host (normalised) and where its traffic really goes. */
  readonly routes: ReadonlyMap<string, RoutedUpstream>
}

export interface RoutedUpstream {
  readonly host: string
  readonly port: number
  readonly protocol: "http:" | "https:"
}

export interface PolicyEntry {
  readonly kind: "grant" | "allow"
  /** How a refusal, a card or a check names it: `[[grant]] "github"`, `[[allow]] hosts = ["example.com"]`. */
  readonly name: string
  /** Its host patterns, normalised ("*.example.com" matches a subdomain, not the apex). */
  readonly hosts: ReadonlyArray<string>
  /** Its ports (443 when it lists none). */
  readonly ports: ReadonlyArray<number>
  readonly scope: ReadonlyArray<string>
  /** Its request rules; null when it has none and its default allows (every request goes as sent). */
  readonly rules: CompiledRules | null
  /** A [[grant]]'s own settings: its credential, the header it goes in, the provider-side tools it allows. */
  readonly grant: GrantRule | undefined
  /** The address literals among its hosts: the only private addresses a dial for it may reach. */
  readonly addresses: ReadonlyArray<string>
  /** The entry as JSON: its part of an upstream pool's key (an agent never serves two entries). */
  readonly key: string
}

export interface CompiledRules {
  readonly rules: ReadonlyArray<CompiledRule>
  /** What decides a request no rule matches. */
  readonly fallback: RuleAction
  /**
   * Which rules a request's first path segment can match, by their indexes in order: those whose every
   * pattern starts with a literal are listed under it (folded for a rule that ignores case); the rest
   * (no paths, or a pattern that starts with `*` or `**`) could match any path. A grant with 100 rules
   * then looks at the few its request could match, not at all of them.
   */
  readonly index: RuleIndex
}

export interface RuleIndex {
  readonly any: ReadonlyArray<number>
  readonly byFirst: ReadonlyMap<string, ReadonlyArray<number>>
  readonly byFirstFolded: ReadonlyMap<string, ReadonlyArray<number>>
}

const indexRules = (rules: ReadonlyArray<CompiledRule>): RuleIndex => {
  const any: Array<number> = []
  const byFirst = new Map<string, Array<number>>()
  const byFirstFolded = new Map<string, Array<number>>()
  rules.forEach((r, i) => {
    const firsts = r.paths?.map((p) => p[0] ?? "")
    if (firsts === undefined || firsts.some((f) => f === "*" || f === "**")) return void any.push(i)
    const into = r.fold ? byFirstFolded : byFirst
    for (const f of new Set(firsts)) into.set(f, [...(into.get(f) ?? []), i])
  })
  return { any, byFirst, byFirstFolded }
}

export interface CompiledRule {
  readonly rule: RequestRule
  /** `rule 2 (methods = ["GET"], …)`: how a refusal, a card and a check name it. */
  readonly text: string
  readonly methods: ReadonlySet<string> | undefined
  /** Each path pattern's segments (folded to lower case when the rule ignores case). */
  readonly paths: ReadonlyArray<ReadonlyArray<string>> | undefined
  readonly fold: boolean
  readonly websocket: boolean
  readonly readsBody: boolean
}

const compileRules = (entry: GrantRule | AllowRule): CompiledRules | null => {
  const rules = entry.rules ?? []
  const fallback = entry.default ?? (rules.length === 0 ? "allow" : "deny")
  if (rules.length === 0 && fallback === "allow") return null
  const compiled = rules.map((rule, i): CompiledRule => {
      const fold = foldsCase(rule)
      return {
        rule,
        text: describeRule(rule, i),
        methods: rule.methods ? new Set(rule.methods) : undefined,
        paths: rule.paths?.map((p) => segmentsOf(p).map((s) => (fold && s !== "*" && s !== "**" ? foldSegment(s) : s))),
        fold,
        websocket: rule.websocket === true,
        readsBody: readsBody(rule)
      }
  })
  return { fallback, rules: compiled, index: indexRules(compiled) }
}

const entryOf = (kind: PolicyEntry["kind"], entry: GrantRule | AllowRule): PolicyEntry => {
  const hosts = entry.hosts.map(normalizeHost)
  return {
    kind,
    name: "credential" in entry ? `[[grant]] ${JSON.stringify(entry.name)}` : `[[allow]] hosts = ${JSON.stringify(entry.hosts)}`,
    hosts,
    ports: entry.ports && entry.ports.length > 0 ? entry.ports : [443],
    scope: entry.scope,
    rules: compileRules(entry),
    grant: "credential" in entry ? entry : undefined,
    addresses: hosts.filter((h) => net.isIP(h) !== 0),
    key: JSON.stringify(entry)
  }
}

const routeOf = (upstream: string): RoutedUpstream => {
  const u = new URL(upstream)
  const protocol = u.protocol === "https:" ? "https:" : "http:"
  return { host: normalizeHost(u.hostname), port: Number(u.port || (protocol === "https:" ? 443 : 80)), protocol }
}

/** The policy of a decoded org.toml. */
export const compilePolicy = (org: Org): Policy => ({
  org,
  entries: [...org.grant.map((g) => entryOf("grant", g)), ...org.allow.map((a) => entryOf("allow", a))],
  routes: new Map(org.route.map((r) => [normalizeHost(r.host), routeOf(r.upstream)]))
})

/** One [[allow]] of exactly this host and port for this subject: what a person's approval of a refused request lets through. */
export const approvedEntry = (host: string, port: number, subject: string): PolicyEntry =>
  entryOf("allow", { hosts: [host], ports: [port], scope: [subject] })
