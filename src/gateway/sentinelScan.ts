import type * as http from "node:http"
import { SENTINEL } from "../contract/constants.js"
import { SENTINEL_SIGNATURE } from "./inject.js"

/** What marks a sentinel wherever it is: the plain string, and the signature of the sentinel JWT. */
const MARKS = [SENTINEL, SENTINEL_SIGNATURE].map((m) => Buffer.from(m))
const hasMark = (text: string) => MARKS.some((m) => text.includes(m.toString()))

/**
 * Where a request about to leave the gateway still carries a sentinel — a placeholder the box
 * was given, never a real value: each header by name, and the query. The upstream will get the
 * placeholder there; the audit says where, and the run is warned.
 */
export const sentinelPlaces = (headers: http.OutgoingHttpHeaders, path: string): Array<string> => {
  const places: Array<string> = []
  for (const [name, value] of Object.entries(headers)) {
    const text = Array.isArray(value) ? value.join(", ") : String(value ?? "")
    if (hasMark(text)) places.push(`header:${name.toLowerCase()}`)
  }
  const query = path.indexOf("?")
  if (query >= 0 && hasMark(decodeURIComponentSafe(path.slice(query + 1)))) places.push("query")
  return places
}

const decodeURIComponentSafe = (text: string) => {
  try {
    return `${text} ${decodeURIComponent(text)}`
  } catch {
    return text
  }
}

/** Watches a request body as it streams for a sentinel, across chunk boundaries, without holding it. */
export const bodyScanner = () => {
  const keep = Math.max(...MARKS.map((m) => m.length)) - 1
  let tail = Buffer.alloc(0)
  let found = false
  return {
    feed: (chunk: Buffer) => {
      if (found) return
      const joined = Buffer.concat([tail, chunk])
      found = MARKS.some((m) => joined.includes(m))
      tail = Buffer.from(joined.subarray(Math.max(0, joined.length - keep)))
    },
    found: () => found
  }
}
