import type * as http from "node:http"
import { SENTINEL } from "../contract/constants.js"
import { SENTINEL_SIGNATURE } from "./inject.js"
import { compileSecret, findSpellings } from "./secretMatch.js"

/**
 * What marks a sentinel wherever it is: the plain string and the signature of the sentinel JWT,
 * each in any spelling of its characters (as themselves, `%hh`, `\uhhhh`, mixed).
 */
const MARKS = [SENTINEL, SENTINEL_SIGNATURE].map(compileSecret)
const hasMark = (text: string) => findSpellings(Buffer.from(text), MARKS, true).found.length > 0

/** The text with every spelling of a sentinel replaced by `[sentinel]` (an audited path says where, never what). */
export const redactMarks = (text: string) => {
  const buf = Buffer.from(text)
  const { found } = findSpellings(buf, MARKS, true)
  if (found.length === 0) return text
  let out = ""
  let at = 0
  for (const [from, to] of found) {
    out += `${buf.subarray(at, from).toString()}[sentinel]`
    at = to
  }
  return out + buf.subarray(at).toString()
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
  if (hasMark(query >= 0 ? target.slice(0, query) : target)) places.push("path")
  if (query >= 0 && hasMark(target.slice(query + 1))) places.push("query")
  return places
}

/** Watches a request body as it streams for a sentinel, across chunk boundaries, without holding it. */
export const bodyScanner = () => {
  let tail = Buffer.alloc(0)
  let found = false
  return {
    feed: (chunk: Buffer) => {
      if (found) return
      const joined = tail.length === 0 ? chunk : Buffer.concat([tail, chunk])
      const seen = findSpellings(joined, MARKS, false)
      found = seen.found.length > 0
      // Only a spelling cut by the chunk's end is kept, to be judged with the next one.
      tail = Buffer.from(joined.subarray(seen.held))
    },
    found: () => found
  }
}
