import { Effect } from "effect"
import type * as http from "node:http"
import { Refusal } from "./refusal.js"

/**
 * A body that may be a model request — JSON, text, or undeclared — is read whole and checked
 * before anything is sent (server-side tools, budgets); any other (a git pack, a binary upload)
 * streams through as it comes.
 */
export const isCheckedBody = (req: http.IncomingMessage) => {
  if (req.method === "GET" || req.method === "HEAD" || req.method === "OPTIONS") return false
  const type = String(req.headers["content-type"] ?? "").toLowerCase()
  return type === "" || type.includes("json") || type.startsWith("text/")
}

/** The whole body, refused (413) past `limit` bytes without reading further. */
export const readBody = (req: http.IncomingMessage, limit: number) =>
  Effect.async<Buffer, Refusal>((resume) => {
    const chunks: Array<Buffer> = []
    let size = 0
    const onData = (c: Buffer) => {
      size += c.length
      if (size > limit) {
        req.off("data", onData)
        req.pause()
        return resume(Effect.fail(new Refusal(413, "request body too large ([gateway] max_body_mib in org.toml)", { why: "malformed" })))
      }
      chunks.push(c)
    }
    req.on("data", onData)
    req.once("end", () => resume(Effect.succeed(Buffer.concat(chunks, size))))
    req.once("error", () => resume(Effect.fail(new Refusal(400, "the request body did not arrive whole", { why: "malformed" }))))
  })

/**
 * The body as it will be sent: parsed JSON is re-serialised, so the provider reads exactly what
 * was checked (no duplicate keys, escapes or non-JSON numbers read one way here and another
 * there). A body declared JSON that does not parse is refused; undeclared text is left as it is.
 */
export const parseChecked = (req: http.IncomingMessage, raw: Buffer) => {
  if (raw.length === 0) return { ok: true as const, json: undefined }
  try {
    return { ok: true as const, json: JSON.parse(raw.toString("utf8")) as unknown }
  } catch {
    const declared = String(req.headers["content-type"] ?? "").toLowerCase().includes("json")
    return declared ? { ok: false as const } : { ok: true as const, json: undefined }
  }
}
