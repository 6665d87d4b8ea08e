import { Effect } from "effect"
import * as http from "node:http"
import { SENTINEL } from "../../contract/constants.js"
import { Refusal } from "../base/refusal.js"
import { responsePairs } from "../base/headers.js"
import { refuseResponse } from "../base/refuse.js"
import { PooledRefusal } from "../upstream/upstreamPool.js"
import type { Meter } from "../metering/meter.js"
import { Scrub, scrubText } from "../secrets/scrub.js"
import { answerDecoding } from "../metering/decodeAnswer.js"

export interface Relayed {
  readonly status: number
  readonly up: number
  readonly down: number
  readonly note?: string
  /** The dial was refused by policy (a name resolving to a private address, say). */
  readonly refusal?: Refusal
}

export interface RelayOptions {
  /** The request target the upstream gets: the one decided (its canonical form, where a rule decided it). */
  readonly path: string
  readonly out: http.OutgoingHttpHeaders
  readonly agent: http.Agent
  /** Real values to scrub from the answer. */
  readonly secrets: ReadonlyArray<string>
  /** Largest streamed request body. */
  readonly limit: number
  readonly onBody: (chunk: Buffer) => void
  /** The body, read whole and checked; absent, the request streams through. */
  readonly checked: Buffer | undefined
  /** A model call's meter: reads the answer's usage, and may cut it at its budget. */
  readonly meter: Meter | undefined
}

/**
 * The request to the upstream and the answer back, the real value scrubbed out, streaming intact,
 * the body capped. `done` is called once, with how it went; the function returned cancels it
 * (the upstream request destroyed). Callbacks, not a fiber: the gateway's common request runs
 * without one (`fastForward`); `relay` is the same for a handler that is an Effect.
 */
export const relayTo = (req: http.IncomingMessage, res: http.ServerResponse, o: RelayOptions, done: (r: Relayed) => void) => {
  let settled = false
  const resume = (r: Relayed) => {
    if (settled) return
    settled = true
    done(r)
  }
  let up = 0
  let down = 0
  let cut = false
  const upReq = http.request({ method: req.method ?? "GET", path: o.path, headers: o.out, agent: o.agent }, (upRes) => {
    // Only bytes the scrubber can read reach the box: a compressed answer is decoded first.
    const decoding = answerDecoding(upRes.headers["content-encoding"])
    if (!decoding.ok) {
      upReq.destroy()
      const refusal = new Refusal(502, `the upstream answered in a content-encoding roster cannot scrub (${decoding.coding})`, { why: "encoding" })
      refuseResponse(res, refusal)
      return resume({ status: 502, up, down, note: refusal.reason })
    }
    // Length may change when a secret is scrubbed: the box gets a chunked answer instead.
    res.writeHead(
      upRes.statusCode ?? 502,
      responsePairs(upRes.rawHeaders, new Set(["content-length", "content-encoding"]), (v) => scrubText(v, o.secrets, SENTINEL))
    )
    res.flushHeaders()
    upRes.on("data", (c: Buffer) => (down += c.length))
    const status = upRes.statusCode ?? 502
    const tap = o.meter?.tap(String(upRes.headers["content-type"] ?? ""), () => {
      cut = true
      upReq.destroy()
    })
    const scrub = new Scrub(o.secrets, Buffer.from(SENTINEL))
    const stages = [...decoding.decoders, ...(tap ? [tap] : []), scrub]
    for (const stage of decoding.decoders) {
      // A body that does not decode is cut, never passed on as it came.
      stage.once("error", (e) => {
        upReq.destroy()
        res.destroy()
        resume({ status: 502, up, down, note: `the answer did not decode: ${e.message}` })
      })
    }
    stages.reduce<NodeJS.ReadableStream>((from, stage) => from.pipe(stage), upRes).pipe(res)
    upRes.once("end", () => decoding.decoders.length === 0 && resume({ status, up, down }))
    scrub.once("end", () => decoding.decoders.length > 0 && !cut && resume({ status, up, down }))
    // The answer cut at its budget ends for the box with the tap's last event; the upstream is just dropped.
    scrub.once("end", () => cut && resume({ status, up, down, note: "answer cut: over its budget" }))
    upRes.once("error", () => cut || resume({ status: 502, up, down, note: "upstream closed mid-answer" }))
  })
  upReq.once("error", (e) => {
    if (cut) return
    const refusal = e instanceof PooledRefusal ? e.refusal : new Refusal(502, e.message)
    refuseResponse(res, refusal)
    resume({ status: refusal.status, up, down, note: e.message, ...(e instanceof PooledRefusal ? { refusal } : {}) })
  })
  if (o.checked) {
    up = o.checked.length
    o.onBody(o.checked)
    upReq.end(o.checked)
    return () => upReq.destroy()
  }
  req.on("data", (c: Buffer) => {
    up += c.length
    o.onBody(c)
    if (up > o.limit) {
      upReq.destroy()
      req.unpipe(upReq)
      if (!res.headersSent) res.writeHead(413, { "content-type": "text/plain", connection: "close" }).end("roster gateway: request body too large\n")
      resume({ status: 413, up, down, note: "body over the limit" })
    }
  })
  req.pipe(upReq)
  return () => upReq.destroy()
}

/** A relayed request's audit fields: how it was answered, the bytes each way, where a sentinel went out. */
export const relayedFields = (r: Relayed, injected: boolean, places: ReadonlyArray<string>) => ({
  status: r.status, injected, bytes_up: r.up, bytes_down: r.down, ...(r.note ? { note: r.note } : {}),
  ...(places.length > 0 ? { sentinel_unsubstituted: places } : {})
})

/** {@link relayTo} as an Effect: interrupting it cancels the upstream request. */
export const relay = (req: http.IncomingMessage, res: http.ServerResponse, o: RelayOptions) =>
  Effect.async<Relayed>((resume) => {
    const cancel = relayTo(req, res, o, (r) => resume(Effect.succeed(r)))
    return Effect.sync(cancel)
  })

