import * as zlib from "node:zlib"
import type { Heads } from "./asked.js"
import { bodyMethods, type RequestBody, queryParams } from "./bodyReads.js"

/**
 * What makes a request mean one thing to an entry's rules and another to its upstream, read from its head
 * and query: a path-override header, a method override (header or `_method` parameter) that names another
 * method than the request's, a GET or HEAD with a body. Undefined when it has one meaning.
 */
export const headProblem = (method: string, query: string, heads: Heads): string | undefined => {
  const route = heads.pathOverrides[0]
  if (route !== undefined) return `a ${route} header (some upstreams route by it instead of the request's path)`
  for (const value of heads.methodOverrides) {
    if (!sameMethod(value, method)) return `a method-override header naming ${JSON.stringify(value)} on a ${method} (some upstreams run the method it names)`
  }
  // Parsed only when it could name one: "_method", or an escape that could spell it.
  const named = query !== "" && /method|%/i.test(query) ? queryParams(query).filter(([k]) => k.toLowerCase() === "_method") : []
  if (named.length > 1) return `the URL's query gives _method ${named.length} times`
  const param = named[0]
  if (param && !sameMethod(param[1], method)) return `a _method=${JSON.stringify(param[1])} parameter on a ${method} (some upstreams run the method it names)`
  if ((method === "GET" || method === "HEAD") && heads.hasBody) return `a ${method} with a body (some upstreams read it, others ignore it)`
  return undefined
}

const sameMethod = (override: string, method: string) => override.trim().toUpperCase() === method.toUpperCase()

/** Whether a POST's body could override its method (a form, or JSON a framework reads `_method` from): read before it is decided. */
export const mayOverride = (method: string, type: string) =>
  method === "POST" && (type === "application/x-www-form-urlencoded" || type === "multipart/form-data" || type === "application/json" || type.endsWith("+json"))

/** Why a POST's body overrides its method, or has no single reading of whether it does; undefined when it does neither. */
export const bodyProblem = (method: string, body: RequestBody): string | undefined => {
  if (method !== "POST") return undefined
  const read = bodyMethods(body)
  if (!read.ok) return read.why
  if (read.value.length > 1) return `a body that gives _method ${read.value.length} times`
  const value = read.value[0]
  return value !== undefined && !sameMethod(value, method) ? `a _method field naming ${JSON.stringify(value)} in the body of a ${method} (some upstreams run the method it names)` : undefined
}

export type Decoded = { readonly ok: true; readonly raw: Buffer } | { readonly ok: false; readonly status: 400 | 413; readonly why: string }

const DECODERS: Readonly<Record<string, (b: Buffer, o: zlib.ZlibOptions & zlib.BrotliOptions) => Buffer>> = {
  gzip: zlib.gunzipSync,
  "x-gzip": zlib.gunzipSync,
  deflate: zlib.inflateSync,
  br: zlib.brotliDecompressSync,
  ...(typeof zlib.zstdDecompressSync === "function" ? { zstd: zlib.zstdDecompressSync as (b: Buffer, o: object) => Buffer } : {})
}

/**
 * A compressed body a rule reads, decoded — within `limit` bytes, or refused (413) — so the rule decides
 * what the upstream will read, and it is sent as decoded. Codings are undone last first; one roster cannot
 * undo, or bytes that do not decode as they say, are refused (400).
 */
export const decodeBody = (raw: Buffer, encoding: string, limit: number): Decoded => {
  const codings = encoding.split(",").map((c) => c.trim().toLowerCase()).filter((c) => c !== "" && c !== "identity")
  let out = raw
  for (const coding of codings.reverse()) {
    const decode = DECODERS[coding]
    if (!decode) return { ok: false, status: 400, why: `a body in a content-encoding roster cannot read (${coding}), which a rule would have to read` }
    try {
      out = decode(out, { maxOutputLength: limit })
    } catch (e) {
      if (e instanceof RangeError) return { ok: false, status: 413, why: `a ${coding} body that decodes to more than [gateway] max_body_mib` }
      return { ok: false, status: 400, why: `a body that does not decode as its content-encoding says (${coding})` }
    }
  }
  return { ok: true, raw: out }
}
