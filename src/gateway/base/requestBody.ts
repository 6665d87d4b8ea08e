import { Effect } from "effect"
import type * as http from "node:http"
import type { Org } from "../../config/schema.js"
import { Refusal } from "./refusal.js"

/** The most of a request body (or a WebSocket frame) the gateway reads: `[gateway] max_body_mib` in org.toml. */
export const bodyLimit = (org: Pick<Org, "gateway">) => org.gateway.max_body_mib * 1024 * 1024

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

/**
 * The whole body, given to `done` once: refused (413) past `limit` bytes without reading further,
 * or (400) when it does not arrive whole. Callbacks, for a request handled without a fiber.
 */
export const collectBody = (req: http.IncomingMessage, limit: number, give: (body: Buffer | Refusal) => void) => {
  const chunks: Array<Buffer> = []
  let size = 0
  let given = false
  const done = (body: Buffer | Refusal) => {
    if (given) return
    given = true
    give(body)
  }
  const onData = (c: Buffer) => {
    size += c.length
    if (size > limit) {
      req.off("data", onData)
      req.pause()
      return done(new Refusal(413, "request body too large ([gateway] max_body_mib in org.toml)", { why: "malformed" }))
    }
    chunks.push(c)
  }
  req.on("data", onData)
  req.once("end", () => done(Buffer.concat(chunks, size)))
  req.once("error", () => done(new Refusal(400, "the request body did not arrive whole", { why: "malformed" })))
}

/** {@link collectBody} as an Effect. */
export const readBody = (req: http.IncomingMessage, limit: number) =>
  Effect.async<Buffer, Refusal>((resume) =>
    collectBody(req, limit, (body) => resume(body instanceof Refusal ? Effect.fail(body) : Effect.succeed(body)))
  )

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
