import { Effect } from "effect"
import type * as http from "node:http"
import { Refusal } from "./refusal.js"

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
