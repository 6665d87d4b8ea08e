import type * as http from "node:http"
import { SENTINEL } from "../../contract/constants.js"
import { SENTINEL_SIGNATURE } from "./inject.js"

/**
 * What marks a sentinel wherever it is: the plain string and the signature of the sentinel JWT.
 * The sentinel is a placeholder, not a secret: this check is the audit's, and it runs on every
 * request's headers and body, so it looks for the forms a client sends (as written, and in the
 * request line percent-decoded) with the native search — the every-spelling matcher is the
 * scrubber's, for the real value in answers.
 */
const MARKS = [SENTINEL, SENTINEL_SIGNATURE]
const MARK_BYTES = MARKS.map((m) => Buffer.from(m))
const hasMark = (text: string) => MARKS.some((m) => text.includes(m))

const decoded = (text: string) => {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

/** The text with every sentinel in it replaced by `[sentinel]` (an audited path says where, never what). */
export const redactMarks = (text: string) => {
  const plain = hasMark(text) ? MARKS.reduce((t, m) => t.split(m).join("[sentinel]"), text) : text
  return hasMark(decoded(plain)) ? MARKS.reduce((t, m) => t.split(m).join("[sentinel]"), decoded(plain)) : plain
}

/**
 * Where a request about to leave the gateway still carries a sentinel — a placeholder the box
 * was given, never a real value: each header by name, and its request line (the method, the
 * path, the query). The upstream will get the placeholder there; the audit says where, and the
 * run is warned. (The body is watched as it streams: `bodyScanner`.)
 */
export const sentinelPlaces = (headers: http.OutgoingHttpHeaders, target: string, method = ""): Array<string> => {
  const places: Array<string> = []
  for (const [name, value] of Object.entries(headers)) {
    const text = Array.isArray(value) ? value.join(", ") : String(value ?? "")
    if (hasMark(text)) places.push(`header:${name.toLowerCase()}`)
  }
  if (hasMark(method)) places.push("method")
  const query = target.indexOf("?")
  const pathPart = query >= 0 ? target.slice(0, query) : target
  if (hasMark(pathPart) || hasMark(decoded(pathPart))) places.push("path")
  if (query >= 0 && (hasMark(target.slice(query + 1)) || hasMark(decoded(target.slice(query + 1))))) places.push("query")
  return places
}

/** Watches a request body as it streams for a sentinel, across chunk boundaries, without holding it. */
export const bodyScanner = () => {
  const keep = Math.max(...MARK_BYTES.map((m) => m.length)) - 1
  let tail = Buffer.alloc(0)
  let found = false
  return {
    feed: (chunk: Buffer) => {
      if (found) return
      const joined = tail.length === 0 ? chunk : Buffer.concat([tail, chunk])
      found = MARK_BYTES.some((m) => joined.includes(m))
      tail = Buffer.from(joined.subarray(Math.max(0, joined.length - keep)))
    },
    found: () => found
  }
}
