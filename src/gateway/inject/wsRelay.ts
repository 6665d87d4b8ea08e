import { Effect } from "effect"
import type { Duplex } from "node:stream"
import { SENTINEL } from "../../contract/constants.js"
import { ScrubCursor } from "../secrets/scrub.js"
import { bodyScanner } from "../secrets/sentinelScan.js"
import { encodeFrame, type FrameHeader, FrameReader, isControl, OP } from "./wsFrames.js"

export interface WsRelayOptions {
  /** Every form of the real value: scrubbed out of the upstream's frames. */
  readonly secrets: ReadonlyArray<string>
  /** The largest upstream frame held whole to be scrubbed. */
  readonly maxFrame: number
  /** A frame from the box carried a sentinel (said once per connection). */
  readonly onSentinel: () => void
}

export interface WsRelayed {
  readonly up: number
  readonly down: number
  /** Why the gateway cut the connection, when it did. */
  readonly note?: string
}

const REPLACEMENT = Buffer.from(SENTINEL)
// A close frame's status code (1008: policy) and reason, as the box hears a cut.
const closeFrame = (reason: string) => encodeFrame(true, OP.close, Buffer.concat([Buffer.from([0x03, 0xf0]), Buffer.from(reason.slice(0, 120))]))

/**
 * The upstream's frames, each held whole, scrubbed and framed anew for the box: a data message's
 * payload is one scrub across its fragments (a form split over two frames is still found), a
 * control frame's payload on its own (a close frame's code kept). A frame under an extension
 * (RSV bits: compressed) or over the size limit cannot be scrubbed: the connection is cut.
 */
const upstreamFrames = (o: WsRelayOptions, send: (frame: Buffer) => void, cut: (why: string) => void) => {
  const reader = new FrameReader()
  let frame: { header: FrameHeader; parts: Array<Buffer> } | undefined
  let message: ScrubCursor | undefined
  const once = (bytes: Buffer) => {
    const c = new ScrubCursor(o.secrets, REPLACEMENT)
    return Buffer.concat([c.feed(bytes), c.end()])
  }
  const emit = (header: FrameHeader, payload: Buffer) => {
    if (isControl(header.opcode)) {
      const scrubbed = header.opcode === OP.close && payload.length >= 2 ? Buffer.concat([payload.subarray(0, 2), once(payload.subarray(2))]) : once(payload)
      return send(encodeFrame(true, header.opcode, scrubbed.subarray(0, 125)))
    }
    if (header.opcode !== OP.continuation) message = new ScrubCursor(o.secrets, REPLACEMENT)
    if (!message) return cut("the upstream sent a continuation frame outside a message")
    const out = header.fin ? Buffer.concat([message.feed(payload), message.end()]) : message.feed(payload)
    send(encodeFrame(header.fin, header.opcode, out))
    if (header.fin) message = undefined
  }
  return (chunk: Buffer) => {
    const readable = reader.push(chunk, (e) => {
      if (e._tag === "Header") {
        if (e.header.rsv !== 0) return cut("the upstream sent a compressed or extended frame, which roster cannot scrub")
        if (e.header.length > o.maxFrame) return cut(`the upstream sent a frame over ${o.maxFrame} bytes`)
        frame = { header: e.header, parts: [] }
      } else if (e._tag === "Payload") frame?.parts.push(e.bytes)
      else if (frame) {
        emit(frame.header, Buffer.concat(frame.parts))
        frame = undefined
      }
    })
    if (!readable) cut("the upstream sent a frame roster cannot read")
  }
}

/** The box's frames go on as they came; read on the side for a sentinel, across frames. */
const boxFrames = (o: WsRelayOptions) => {
  const reader = new FrameReader()
  const scanner = bodyScanner()
  let said = false
  return (chunk: Buffer) => {
    reader.push(chunk, (e) => {
      if (e._tag !== "Payload" || said) return
      scanner.feed(e.bytes)
      if (scanner.found()) {
        said = true
        o.onSentinel()
      }
    })
  }
}

/**
 * A WebSocket both ways after the handshake, until either side closes: the box's frames relayed
 * as sent (and watched for a sentinel), the upstream's scrubbed of the credential. Each side is
 * paused while the other cannot take more.
 */
export const relayWebSocket = (box: Duplex, upstream: Duplex, boxHead: Buffer, upHead: Buffer, o: WsRelayOptions) =>
  Effect.async<WsRelayed>((resume) => {
    let up = 0
    let down = 0
    let note: string | undefined
    let done = false
    const finish = () => {
      if (done) return
      done = true
      box.destroy()
      upstream.destroy()
      resume(Effect.succeed({ up, down, ...(note ? { note } : {}) }))
    }
    const cut = (why: string) => {
      if (note !== undefined) return
      note = why
      if (box.writable) box.end(closeFrame(`roster gateway: ${why}`))
      upstream.destroy()
      setImmediate(finish)
    }
    const toBox = (frame: Buffer) => {
      if (note === undefined && !box.write(frame)) upstream.pause()
    }
    const fromUpstream = upstreamFrames(o, toBox, cut)
    const watch = boxFrames(o)
    const fromBox = (chunk: Buffer) => {
      up += chunk.length
      watch(chunk)
      if (note === undefined && !upstream.write(chunk)) box.pause()
    }
    box.on("drain", () => upstream.resume())
    upstream.on("drain", () => box.resume())
    upstream.on("data", (chunk: Buffer) => {
      down += chunk.length
      if (note === undefined) fromUpstream(chunk)
    })
    box.on("data", fromBox)
    for (const side of [box, upstream]) {
      side.once("close", finish)
      side.once("error", finish)
      side.once("end", () => (side === box ? upstream : box).end())
    }
    if (upHead.length > 0) upstream.unshift(upHead)
    if (boxHead.length > 0) fromBox(boxHead)
    return Effect.sync(finish)
  })
