import * as crypto from "node:crypto"

/** How far a request's time may be from the receiver's clock: `roster doctor` flags skew long before this. */
export const RPC_SKEW_MS = 60_000

export const NODE_HEADER = "x-roster-node"
export const TIME_HEADER = "x-roster-time"
export const SIGNATURE_HEADER = "x-roster-signature"

/** What a signature covers: the request itself, who sends it and when — a signed ping cannot be replayed as a nudge. */
const material = (method: string, path: string, node: string, time: string, body: string) =>
  [method.toUpperCase(), path, node, time, crypto.createHash("sha256").update(body).digest("hex")].join("\n")

const mac = (key: Buffer, text: string) => crypto.createHmac("sha256", key).update(text).digest("hex")

/** The headers that make a request to another node's runner RPC: the fleet's key signs it. */
export const signRequest = (key: Buffer, request: { method: string; path: string; node: string; body: string }, nowMs: number) => {
  const time = String(nowMs)
  return {
    [NODE_HEADER]: request.node,
    [TIME_HEADER]: time,
    [SIGNATURE_HEADER]: mac(key, material(request.method, request.path, request.node, time, request.body))
  }
}

type Headers = Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

const one = (h: Headers, name: string) => {
  const v = h[name]
  return typeof v === "string" ? v : undefined
}

/**
 * Why a request is refused, or the node that sent it: signed with the fleet's key, over this very
 * method, path and body, within RPC_SKEW_MS of this node's clock.
 */
export const verifyRequest = (
  key: Buffer,
  request: { method: string; path: string; headers: Headers; body: string },
  nowMs: number
): { readonly node: string } | { readonly refused: string } => {
  const node = one(request.headers, NODE_HEADER)
  const time = one(request.headers, TIME_HEADER)
  const signature = one(request.headers, SIGNATURE_HEADER)
  if (!node || !time || !signature) return { refused: "not signed with the fleet's key" }
  const at = Number(time)
  if (!Number.isFinite(at) || Math.abs(nowMs - at) > RPC_SKEW_MS) return { refused: "its time is more than 60 s from this node's clock" }
  const want = Buffer.from(mac(key, material(request.method, request.path, node, time, request.body)), "hex")
  const got = Buffer.from(signature, "hex")
  if (got.length !== want.length || !crypto.timingSafeEqual(got, want)) return { refused: "its signature is not the fleet's key's" }
  return { node }
}
