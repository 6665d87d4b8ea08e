import type { CompiledRule, CompiledRules } from "../../config/policy.js"
import { foldSegment, type RuleAction } from "../../config/requestRule.js"
import { graphqlOf, jsonrpcCallsOf, type Read, type RequestBody } from "./bodyReads.js"
import type { GraphqlOperation } from "./graphqlOperation.js"

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

/**
 * The rules whose kind (an upgrade or not), method and paths match, in order: only those the request's
 * first segment can match (the entry's index), in plain loops, as this runs on every request. A rule that
 * ignores case is matched against the path's segments folded (once, when one asks).
 */
export const candidatesFor = (rules: CompiledRules, method: string, segments: ReadonlyArray<string>, upgrade: boolean) => {
  const first = segments[0] ?? ""
  const { any, byFirst, byFirstFolded } = rules.index
  const named = byFirst.get(first)
  const folded = byFirstFolded.size > 0 ? byFirstFolded.get(foldSegment(first)) : undefined
  const indexes = named === undefined && folded === undefined ? any : [...new Set([...any, ...(named ?? []), ...(folded ?? [])])].sort((a, b) => a - b)
  const out: Array<CompiledRule> = []
  let foldedPath: ReadonlyArray<string> | undefined
  for (const i of indexes) {
    const r = rules.rules[i] as CompiledRule
    if (r.websocket !== upgrade || (r.methods !== undefined && !r.methods.has(method))) continue
    if (r.paths === undefined) {
      out.push(r)
      continue
    }
    const path = r.fold ? (foldedPath ??= segments.map(foldSegment)) : segments
    for (const p of r.paths) {
      if (matches(p, path)) {
        out.push(r)
        break
      }
    }
  }
  return out
}

/** "mutation" matches every mutation, "mutation:CreateIssue" that one; "tools/call" every tool, "tools/call:x" that one. */
const named = (pattern: string, what: string) => pattern === what || (!pattern.includes(":") && what.startsWith(`${pattern}:`))
const operationText = (op: Extract<GraphqlOperation, { ok: true }>) => (op.name ? `${op.type}:${op.name}` : op.type)

export type RuleDecision = { readonly action: RuleAction; readonly by: string; readonly rule?: CompiledRule }
export type DecidedCall = { readonly call: string | undefined; readonly d: RuleDecision }

export type DecidedCalls =
  | { readonly ok: true; readonly calls: number; readonly each: ReadonlyArray<DecidedCall>; readonly graphql: string | undefined }
  | { readonly ok: false; readonly why: string; readonly by: string }

/**
 * Each call of the request decided by the first candidate that matches it, else `fallback`: one call for a
 * plain request, one per JSON-RPC call of a batch. The GraphQL operation is read once, and only for a rule
 * that asks: a request no GraphQL rule reaches is never parsed as one.
 */
export const decideEach = (candidates: ReadonlyArray<CompiledRule>, fallback: RuleAction, method: string, query: string, body: RequestBody | undefined): DecidedCalls => {
  let graphql: Read<Extract<GraphqlOperation, { ok: true }>> | undefined
  const operation = () => (graphql ??= graphqlOf(method, query, body))
  const decide = (call: string | undefined): RuleDecision | { readonly unread: string } => {
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
    const read = jsonrpcCallsOf(body)
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
