import { type GrantRule, SERVER_TOOL_KINDS } from "../../config/schema.js"
import { hostMatches } from "../../config/hosts.js"

/**
 * Tools a model provider runs on its own side — web search, web fetch, code execution, remote
 * MCP servers — reach the network from the provider, where the gateway never sees a request.
 * A request that declares one is egress, allowed only when its grant says `server_tools`.
 */
export type ServerToolKind = (typeof SERVER_TOOL_KINDS)[number]

/** Anthropic's dated types (`web_search_20250305`) and the OpenAI Responses names. */
const kindOf = (type: unknown): ServerToolKind | undefined => {
  if (typeof type !== "string") return undefined
  if (/^web_search(_|$)/.test(type)) return "web_search"
  if (/^web_fetch(_|$)/.test(type)) return "web_fetch"
  if (/^code_execution(_|$)/.test(type) || type === "code_interpreter") return "code_execution"
  if (type === "mcp") return "mcp"
  return undefined
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/** The parameter objects of a model request: the request itself, and each request of a batch. */
const paramsOf = (body: Record<string, unknown>): Array<Record<string, unknown>> => {
  const out = [body]
  if (isRecord(body.params)) out.push(body.params)
  if (Array.isArray(body.requests)) for (const r of body.requests) if (isRecord(r) && isRecord(r.params)) out.push(r.params)
  return out
}

export type Vetted =
  | { readonly ok: true; readonly changed: boolean }
  | { readonly ok: false; readonly kinds: ReadonlyArray<ServerToolKind>; readonly detail: string }

/** A box's own domain list cut down to what the grant allows: a listed domain or one under it. */
const narrowDomains = (asked: unknown, allowed: ReadonlyArray<string>) => {
  if (!Array.isArray(asked) || asked.length === 0) return [...allowed]
  return asked.filter((d): d is string =>
    typeof d === "string" && allowed.some((a) => hostMatches(a, d.toLowerCase()) || hostMatches(`*.${a}`, d.toLowerCase()))
  )
}

/**
 * Checks (and, for domains, rewrites in place) the server-side tools a parsed model request
 * declares. Refused: a kind the grant does not list. With `server_tool_domains`, each web
 * search/fetch tool gets `allowed_domains` no wider than that list (its `blocked_domains`
 * dropped: the providers take one or the other).
 */
export const vetServerTools = (body: unknown, grant: GrantRule): Vetted => {
  if (!isRecord(body)) return { ok: true, changed: false }
  const allowed = new Set<string>(grant.server_tools ?? [])
  const refused = new Set<ServerToolKind>()
  let changed = false
  for (const params of paramsOf(body)) {
    if (params.mcp_servers !== undefined && !(Array.isArray(params.mcp_servers) && params.mcp_servers.length === 0)) {
      if (!allowed.has("mcp")) refused.add("mcp")
    }
    if (!Array.isArray(params.tools)) continue
    for (const tool of params.tools) {
      const kind = isRecord(tool) ? kindOf(tool.type) : undefined
      if (!kind || !isRecord(tool)) continue
      if (!allowed.has(kind)) {
        refused.add(kind)
        continue
      }
      if ((kind === "web_search" || kind === "web_fetch") && grant.server_tool_domains) {
        const domains = narrowDomains(tool.allowed_domains, grant.server_tool_domains)
        if (domains.length === 0) {
          return { ok: false, kinds: [kind], detail: `its ${kind} tool asks only for domains outside server_tool_domains` }
        }
        tool.allowed_domains = domains
        delete tool.blocked_domains
        changed = true
      }
    }
  }
  if (refused.size === 0) return { ok: true, changed }
  return { ok: false, kinds: [...refused], detail: `it declares provider-side ${[...refused].join(", ")}` }
}

/** The refusal's words: what was refused, why it matters, and both ways out. */
export const serverToolsReason = (grant: GrantRule, vetted: Extract<Vetted, { ok: false }>) =>
  `the model request was not sent: ${vetted.detail}, which the provider would run on its own side, reaching the network ` +
  `where roster's gateway cannot see or limit it. Send the request without ${vetted.kinds.length > 1 ? "those tools" : "that tool"} ` +
  `(fetch through your own tools instead, which go through the gateway), or an operator adds ` +
  `server_tools = ${JSON.stringify([...new Set([...(grant.server_tools ?? []), ...vetted.kinds])])} to the [[grant]] named "${grant.name}"`
