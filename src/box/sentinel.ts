import { SENTINEL } from "../contract/constants.js"

type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [k: string]: Json }
type JsonObject = { readonly [k: string]: Json }

const HUNDRED_YEARS_MS = 100 * 365 * 24 * 3600 * 1000
const b64url = (s: string) => Buffer.from(s).toString("base64url")

/**
 * A structurally valid but useless JWT: pi decodes it (account id, expiry) and never has a
 * credential. The signature is a fixed string, so it can never verify anywhere.
 */
export const sentinelJwt = (nowMs: number): string => {
  const now = Math.floor(nowMs / 1000)
  const header = b64url(JSON.stringify({ alg: "none", typ: "JWT" }))
  const payload = b64url(JSON.stringify({
    iat: now,
    exp: now + HUNDRED_YEARS_MS / 1000,
    "https://api.openai.com/auth": { chatgpt_account_id: "roster-sentinel-account" }
  }))
  return `${header}.${payload}.${b64url("roster-sentinel-signature")}`
}

const isObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v)

// Only these fields of a login ever reach the box; anything else a login carries (provider
// extras, a second key) is dropped rather than trusted to be harmless.
const KNOWN_FIELDS = ["type", "access", "refresh", "accountId", "expires", "key"] as const

/** A pi login with every secret replaced and only the fields pi reads kept. */
export const sentinelize = (entry: unknown, nowMs: number): JsonObject => {
  if (!isObject(entry)) return {}
  const out: Record<string, Json> = {}
  const type = entry.type
  if (typeof type === "string" && /^[a-z_-]{1,32}$/.test(type)) out.type = type
  if ("access" in entry) {
    const access = entry.access
    out.access = typeof access === "string" && access.split(".").length === 3 ? sentinelJwt(nowMs) : SENTINEL
  }
  if ("refresh" in entry) out.refresh = SENTINEL
  if ("key" in entry) out.key = SENTINEL
  if ("accountId" in entry) out.accountId = "roster-sentinel-account"
  if ("expires" in entry) out.expires = nowMs + HUNDRED_YEARS_MS
  return Object.fromEntries(KNOWN_FIELDS.filter((k) => k in out).map((k) => [k, out[k] as Json]))
}
