import type { IncomingHttpHeaders } from "node:http"
import { SENTINEL } from "../../contract/constants.js"

/** Which header a credential travels in. */
export type InjectKind = "x-api-key" | "bearer" | "basic"

export const SENTINEL_SIGNATURE = Buffer.from("roster-sentinel-signature").toString("base64url")

/** Every form of sentinel the provisioner writes: the plain string and the sentinel JWT. */
export const isSentinel = (value: string): boolean => {
  if (value === SENTINEL) return true
  const parts = value.split(".")
  return parts.length === 3 && parts[2] === SENTINEL_SIGNATURE
}

export interface Injected {
  readonly headers: IncomingHttpHeaders
  readonly injected: boolean
  /** Every string on the wire that carries the real value (the value itself, and an encoded form): scrubbed from answers. */
  readonly reveals: ReadonlyArray<string>
}

/**
 * Swaps the sentinel for the real value in the one header this kind of credential uses.
 * Anything else — another header, the query, the body, a value that is not a sentinel — is
 * left exactly as the box sent it.
 */
export const injectCredential = (headers: IncomingHttpHeaders, kind: InjectKind, real: string): Injected => {
  const out: IncomingHttpHeaders = { ...headers }
  const none: Injected = { headers: out, injected: false, reveals: [real] }
  if (kind === "x-api-key") {
    const v = headers["x-api-key"]
    if (typeof v === "string" && isSentinel(v.trim())) {
      out["x-api-key"] = real
      return { headers: out, injected: true, reveals: [real] }
    }
    return none
  }
  const auth = headers.authorization
  if (typeof auth !== "string") return none
  const m = /^(\S+)\s+(.+)$/.exec(auth.trim())
  if (!m) return none
  const scheme = (m[1] ?? "").toLowerCase()
  const rest = (m[2] ?? "").trim()
  if (kind === "bearer" && scheme === "bearer" && isSentinel(rest)) {
    out.authorization = `Bearer ${real}`
    return { headers: out, injected: true, reveals: [real] }
  }
  if (kind === "basic" && scheme === "basic") {
    const decoded = Buffer.from(rest, "base64").toString("utf8")
    const colon = decoded.indexOf(":")
    const user = colon < 0 ? decoded : decoded.slice(0, colon)
    const pass = colon < 0 ? "" : decoded.slice(colon + 1)
    if (isSentinel(pass) || isSentinel(user)) {
      const swapped = Buffer.from(`${isSentinel(user) ? real : user}:${isSentinel(pass) ? real : pass}`).toString("base64")
      out.authorization = `Basic ${swapped}`
      return { headers: out, injected: true, reveals: [real, swapped] }
    }
  }
  return none
}
