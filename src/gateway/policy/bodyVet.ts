import { Schema } from "effect"
import { Refusal } from "../base/refusal.js"
import { serverToolsReason, vetServerTools } from "./serverTools.js"
import type { Inject } from "./verdict.js"

/**
 * A body that may be a model request — JSON, text, or undeclared — is read whole and checked before
 * anything is sent to a [[grant]]'s host (server-side tools, budgets); any other (a git pack, a binary
 * upload) streams through as it comes.
 */
export const isCheckedBody = (method: string, contentType: string) => {
  if (method === "GET" || method === "HEAD" || method === "OPTIONS") return false
  const type = contentType.toLowerCase()
  return type === "" || type.includes("json") || type.startsWith("text/")
}

export interface Checked {
  /** The body to send: parsed JSON re-serialised, so the provider reads exactly what was checked. */
  readonly body: Buffer
  readonly json: unknown
}

/**
 * A grant's model request, checked before anything of it leaves: refused when it declares provider-side
 * tools its grant does not allow, or is declared JSON and does not parse; sent as re-serialised (no
 * duplicate keys, escapes or non-JSON numbers read one way here and another there). Undeclared text that
 * is not JSON goes as it is.
 */
export const checkBody = (contentType: string, raw: Buffer, inject: Inject): { readonly refusal: Refusal } | Checked => {
  let json: unknown
  if (raw.length > 0) {
    try {
      json = JSON.parse(raw.toString("utf8"))
    } catch {
      if (contentType.toLowerCase().includes("json")) return { refusal: new Refusal(400, "the request body is declared JSON and does not parse", { why: "malformed" }) }
      return { body: raw, json: undefined }
    }
  }
  if (json === undefined) return { body: raw, json: undefined }
  const vetted = vetServerTools(json, inject.vet)
  if (!vetted.ok) return { refusal: new Refusal(403, serverToolsReason(inject.vet, vetted), { why: "server_tools" }) }
  return { body: Buffer.from(JSON.stringify(json)), json }
}

/** The model a request names (`model` in its JSON body). */
export const modelOf = (json: unknown) => (namesModel(json) ? json.model : "unknown")
const namesModel = Schema.is(Schema.Struct({ model: Schema.String }))
