import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http"

/** Headers for one hop only; the run token (Proxy-Authorization) is the gateway's alone and never forwarded. */
export const HOP_BY_HOP = new Set([
  "proxy-authorization", "proxy-connection", "proxy-authenticate", "connection", "keep-alive", "te", "trailer",
  "transfer-encoding", "upgrade"
])

export const forwardable = (headers: IncomingHttpHeaders): OutgoingHttpHeaders => {
  const out: OutgoingHttpHeaders = {}
  const named = new Set(
    String(headers.connection ?? "").split(",").map((s) => s.trim().toLowerCase()).filter((s) => s !== "")
  )
  for (const [k, v] of Object.entries(headers)) {
    if (v !== undefined && !HOP_BY_HOP.has(k) && !named.has(k)) out[k] = v
  }
  return out
}

/** Response headers as raw pairs (case and order kept), without hop-by-hop ones and `drop`, values mapped. */
export const responsePairs = (raw: ReadonlyArray<string>, drop: ReadonlySet<string> = new Set(), map: (v: string) => string = (v) => v) => {
  const pairs: Array<string> = []
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const k = raw[i] as string
    const lower = k.toLowerCase()
    if (!HOP_BY_HOP.has(lower) && !drop.has(lower)) pairs.push(k, map(raw[i + 1] as string))
  }
  return pairs
}
