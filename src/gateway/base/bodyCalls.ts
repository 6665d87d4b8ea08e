import { Schema } from "effect"
import { graphqlOperation, type GraphqlOperation } from "./graphqlOperation.js"

/** What a request says it is doing, read from its body (or a GraphQL GET's query): no single answer is a refusal. */
export type Read<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly why: string }

const GraphqlBody = Schema.Struct({ query: Schema.String })
const isGraphqlBody = Schema.is(GraphqlBody)

/** The request's JSON body (undefined when it has none), or why it has no single meaning. */
const jsonOf = (raw: Buffer): Read<unknown> => {
  if (raw.length === 0) return { ok: true, value: undefined }
  try {
    return { ok: true, value: JSON.parse(raw.toString("utf8")) as unknown }
  } catch {
    return { ok: false, why: "the body is not JSON" }
  }
}

/**
 * The GraphQL operation of a request: a GET's `query` parameter, an `application/graphql` body, or a JSON
 * body's `query`. A batch (a JSON array), or a persisted query sent as its hash alone, is refused: the gateway
 * would have to guess what runs.
 */
export const graphqlOf = (method: string, url: string, contentType: string, raw: Buffer): Read<Extract<GraphqlOperation, { ok: true }>> => {
  const read = (doc: string): Read<Extract<GraphqlOperation, { ok: true }>> => {
    const op = graphqlOperation(doc)
    return op.ok ? { ok: true, value: op } : { ok: false, why: op.why }
  }
  if (method === "GET") {
    const doc = new URL(url, "http://x").searchParams.get("query")
    return doc === null ? { ok: false, why: "a GraphQL GET with no query parameter (a persisted query's hash alone names no operation the gateway can read)" } : read(doc)
  }
  if (contentType.toLowerCase().startsWith("application/graphql")) return read(raw.toString("utf8"))
  const json = jsonOf(raw)
  if (!json.ok) return json
  if (Array.isArray(json.value)) return { ok: false, why: "a batch of GraphQL operations (the gateway decides one a request)" }
  if (!isGraphqlBody(json.value)) return { ok: false, why: "a GraphQL request with no query document (a persisted query's hash alone names no operation the gateway can read)" }
  return read(json.value.query)
}

const Call = Schema.Struct({ method: Schema.String, params: Schema.optional(Schema.Unknown) })
const isCall = Schema.is(Call)
const ToolCall = Schema.Struct({ name: Schema.String })
const isToolCall = Schema.is(ToolCall)

/**
 * The JSON-RPC calls of a request, each as a rule names it: its method, and for MCP's `tools/call` the
 * tool too (`tools/call:write_file`). A batch gives each of its calls (a notification is a call); a body
 * that is not JSON-RPC, or a tools/call that names no tool, is refused.
 */
export const jsonrpcCallsOf = (raw: Buffer): Read<ReadonlyArray<string>> => {
  const json = jsonOf(raw)
  if (!json.ok) return json
  const items = Array.isArray(json.value) ? json.value : [json.value]
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
