import { Schema } from "effect"
import { graphqlOperation, type GraphqlOperation } from "./graphqlOperation.js"
import { controlKeyProblem, keysAt } from "./jsonKeys.js"

/** What a request says it is doing, read from its body (or a GraphQL GET's query): no single answer is a refusal. */
export type Read<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly why: string }

/** The body a rule may need: its declared content type and its bytes (decoded, when it came compressed). */
export interface RequestBody {
  readonly contentType: string
  readonly raw: Buffer
}

/** A Content-Type's media type, lower case, without its parameters. */
export const mediaType = (contentType: string) => (contentType.split(";")[0] ?? "").trim().toLowerCase()

export const isJsonType = (type: string) => type === "application/json" || /^application\/[a-z0-9.!#$&^_-]+\+json$/.test(type)
export const isFormType = (type: string) => type === "application/x-www-form-urlencoded" || type === "multipart/form-data"

/** The parameters of a query string, each name decoded, in order, duplicates kept. */
export const queryParams = (query: string): ReadonlyArray<readonly [string, string]> => [...new URLSearchParams(query)]

/** Why a list of named values has no single reading of `controls` (twice, or in another case), or undefined. */
const paramProblem = (params: ReadonlyArray<readonly [string, string]>, controls: ReadonlyArray<string>, where: string) =>
  controlKeyProblem([params.map(([k]) => k)], controls, where)

/** The JSON of a body known to be JSON, or why it is not. */
const jsonOf = (raw: Buffer): Read<{ readonly value: unknown; readonly text: string }> => {
  const text = raw.toString("utf8")
  try {
    return { ok: true, value: { value: JSON.parse(text) as unknown, text } }
  } catch {
    return { ok: false, why: "the body is declared JSON and is not JSON" }
  }
}

const parsesAsJson = (raw: Buffer) => {
  try {
    JSON.parse(raw.toString("utf8"))
    return true
  } catch {
    return false
  }
}

const GRAPHQL_PARAMS = ["query", "operationName", "variables", "extensions"] as const
const GraphqlBody = Schema.Struct({ query: Schema.String })
const isGraphqlBody = Schema.is(GraphqlBody)
type Operation = Extract<GraphqlOperation, { ok: true }>

const operationOf = (doc: string): Read<Operation> => {
  const op = graphqlOperation(doc)
  return op.ok ? { ok: true, value: op } : { ok: false, why: op.why }
}

/**
 * The GraphQL operation of a request: a GET's `query` parameter, an `application/graphql` body, or a JSON
 * body's `query` — and only one of them: a GET with a body, a POST whose URL also names an operation, a
 * parameter or key given twice or in another case (servers differ on which they read), a body whose declared
 * type is neither, or one declared `application/graphql` that is JSON, has two readings and is refused; so
 * are a batch and a persisted query sent as its hash alone (the gateway would have to guess what runs).
 */
export const graphqlOf = (method: string, query: string, body: RequestBody | undefined): Read<Operation> => {
  const params = queryParams(query)
  const twice = paramProblem(params, GRAPHQL_PARAMS, "the URL's query")
  if (twice) return { ok: false, why: twice }
  const sent = body !== undefined && body.raw.length > 0
  if (method === "GET" || method === "HEAD") {
    if (sent) return { ok: false, why: "a GraphQL GET with a body (servers differ on whether the URL or the body runs)" }
    const doc = params.find(([k]) => k === "query")?.[1]
    return doc === undefined ? { ok: false, why: "a GraphQL GET with no query parameter (a persisted query's hash alone names no operation the gateway can read)" } : operationOf(doc)
  }
  if (params.some(([k]) => GRAPHQL_PARAMS.some((c) => c.toLowerCase() === k.toLowerCase()))) {
    return { ok: false, why: "a GraphQL request whose URL names an operation as well as its body (servers differ on which runs)" }
  }
  if (!sent) return { ok: false, why: "a GraphQL request with no query document (a persisted query's hash alone names no operation the gateway can read)" }
  const type = mediaType(body.contentType)
  if (type === "application/graphql") {
    if (parsesAsJson(body.raw)) return { ok: false, why: "a body declared application/graphql that is JSON (servers differ on which they read it as)" }
    return operationOf(body.raw.toString("utf8"))
  }
  if (!isJsonType(type)) return { ok: false, why: declaredNot(type, "application/json or application/graphql") }
  const json = jsonOf(body.raw)
  if (!json.ok) return json
  if (Array.isArray(json.value.value)) return { ok: false, why: "a batch of GraphQL operations (the gateway decides one a request)" }
  const keys = keysAt(json.value.text, new Set([""]))
  const problem = controlKeyProblem(keys.get(""), GRAPHQL_PARAMS, "the JSON body")
  if (problem) return { ok: false, why: problem }
  if (!isGraphqlBody(json.value.value)) return { ok: false, why: "a GraphQL request with no query document (a persisted query's hash alone names no operation the gateway can read)" }
  return operationOf(json.value.value.query)
}

const declaredNot = (type: string, wanted: string) =>
  type === "" ? `a body with no declared type (roster reads ${wanted}; a server may read it as either)` : `a body declared ${type} (roster reads ${wanted}; the upstream may read it otherwise)`

const Call = Schema.Struct({ method: Schema.String, params: Schema.optional(Schema.Unknown) })
const isCall = Schema.is(Call)
const ToolCall = Schema.Struct({ name: Schema.String })
const isToolCall = Schema.is(ToolCall)
const CALL_KEYS = ["jsonrpc", "id", "method", "params"] as const
const PARAM_KEYS = ["name", "arguments"] as const

/**
 * The JSON-RPC calls of a request, each as a rule names it: its method, and for MCP's `tools/call` the
 * tool too (`tools/call:write_file`). A batch gives each of its calls (a notification is a call); a body
 * that is not declared JSON, is not JSON-RPC, names a call's `method`, `params` (or a tool's `name`) twice or
 * in another case, or a tools/call that names no tool, is refused.
 */
export const jsonrpcCallsOf = (body: RequestBody | undefined): Read<ReadonlyArray<string>> => {
  const raw = body?.raw ?? Buffer.alloc(0)
  const type = mediaType(body?.contentType ?? "")
  if (raw.length === 0) return { ok: false, why: "a JSON-RPC request with no body" }
  if (!isJsonType(type)) return { ok: false, why: declaredNot(type, "application/json") }
  const json = jsonOf(raw)
  if (!json.ok) return json
  const keys = keysAt(json.value.text, new Set(["", "[]", "params", "[].params"]))
  const problem = controlKeyProblem(keys.get(""), CALL_KEYS, "the call") ?? controlKeyProblem(keys.get("[]"), CALL_KEYS, "a call of the batch") ??
    controlKeyProblem(keys.get("params"), PARAM_KEYS, "the call's params") ?? controlKeyProblem(keys.get("[].params"), PARAM_KEYS, "a call's params")
  if (problem) return { ok: false, why: problem }
  const items = Array.isArray(json.value.value) ? json.value.value : [json.value.value]
  if (items.length === 0) return { ok: false, why: "an empty JSON-RPC batch" }
  const calls: Array<string> = []
  for (const item of items) {
    if (!isCall(item)) return { ok: false, why: "a body that is not a JSON-RPC call (no method)" }
    if (item.method !== "tools/call") {
      calls.push(item.method)
    } else {
      if (!isToolCall(item.params)) return { ok: false, why: "an MCP tools/call that names no tool" }
      calls.push(`tools/call:${item.params.name}`)
    }
  }
  return { ok: true, value: calls }
}

/**
 * The `_method` fields of a POST's body, as frameworks read them to override its method (Rails and Symfony
 * from a form, Laravel from a JSON body too): each value, in order. A form body that parses as JSON has two
 * readings; so does a body with no declared type that is either.
 */
export const bodyMethods = (body: RequestBody): Read<ReadonlyArray<string>> => {
  const type = mediaType(body.contentType)
  if (type === "application/x-www-form-urlencoded") {
    if (parsesAsJson(body.raw)) return { ok: false, why: "a body declared a form that is JSON (servers differ on which they read it as)" }
    return { ok: true, value: queryParams(body.raw.toString("utf8")).filter(([k]) => k.toLowerCase() === "_method").map(([, v]) => v) }
  }
  if (type === "multipart/form-data") return multipartMethods(body)
  if (isJsonType(type)) {
    const json = jsonOf(body.raw)
    if (!json.ok) return json
    const keys = keysAt(json.value.text, new Set([""])).get("")?.[0] ?? []
    const value = json.value.value
    const fields = keys.filter((k) => k.toLowerCase() === "_method")
    if (fields.length === 0) return { ok: true, value: [] }
    const named = typeof value === "object" && value !== null && !Array.isArray(value) ? Object.entries(value).filter(([k]) => k.toLowerCase() === "_method") : []
    return fields.length > 1 ? { ok: true, value: fields.map(() => "(given twice)") } : { ok: true, value: named.map(([, v]) => String(v)) }
  }
  return { ok: true, value: [] }
}

/** A multipart form's `_method` parts, by the boundary its Content-Type names. */
const multipartMethods = (body: RequestBody): Read<ReadonlyArray<string>> => {
  const boundary = /;\s*boundary="?([^";]+)"?/i.exec(body.contentType)?.[1]
  if (!boundary) return { ok: false, why: "a multipart form whose Content-Type names no boundary" }
  const text = body.raw.toString("latin1")
  const values: Array<string> = []
  for (const part of text.split(`--${boundary}`).slice(1)) {
    const split = part.indexOf("\r\n\r\n")
    if (split < 0) continue
    const head = part.slice(0, split)
    if (/^\s*content-disposition:[^\r\n]*\bname\*?=\s*(?:"_method"|_method\b|utf-8''_method)/im.test(head)) {
      values.push(part.slice(split + 4).replace(/\r\n$/, ""))
    }
  }
  return { ok: true, value: values }
}
