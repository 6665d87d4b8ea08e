import { Effect } from "effect"
import type { Duplex } from "node:stream"
import { SENTINEL } from "../../contract/constants.js"
import { ScrubCursor } from "../secrets/scrub.js"
import { bodyScanner } from "../secrets/sentinelScan.js"
import { BoxFrames, encodeFrame, type FrameHeader, FrameReader, isControl, OP } from "./wsFrames.js"

export interface WsRelayOptions {
  /** Every form of the real value: scrubbed out of the upstream's frames. */
  readonly secrets: ReadonlyArray<string>
  /** The largest upstream frame held whole to be scrubbed. */
  readonly maxFrame: number
  /**
   * A frame from the box carried a sentinel (said once per connection): the box's bytes wait
   * until `done`, so the run is tainted before that frame reaches the upstream.
   */
  readonly onSentinel: (done: (ok: boolean) => void) => void
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

// How long the end of a message whose last few bytes could begin a secret waits for the next one.
const HOLD_END_MS = 100
// A message end holding this many bytes of a secret's beginning waits for the next message (or the
// connection's end), however long: sent after a while, it would hand the box most of the secret.
const LONG_HELD = 8

/**
 * The upstream's frames, each held whole, scrubbed and framed anew for the box. The data
 * messages are one scrub stream: a form split over two fragments, or over two messages, is still
 * found. A message whose last bytes could begin a secret is sent without its end; the end (a
 * continuation frame) follows with the next message — scrubbed with it — or, when it is a few
 * bytes only, after HOLD_END_MS alone, and then those bytes are still the start of what the next
 * message is judged with, so a secret split across two messages however far apart never reaches
 * the box in two pieces it can join. Control frames are scrubbed on their own (a close frame's
 * code kept). A frame under an extension (RSV bits: compressed) or over the size limit cannot be
 * scrubbed: the connection is cut.
 */
const upstreamFrames = (o: WsRelayOptions, send: (frame: Buffer) => void, cut: (why: string) => void) => {
  const reader = new FrameReader()
  let frame: { header: FrameHeader; parts: Array<Buffer> } | undefined
  const cursor = new ScrubCursor(o.secrets, REPLACEMENT)
  let inMessage = false
  let holding = false
  let heldEnd: NodeJS.Timeout | undefined
  const once = (bytes: Buffer) => {
    const c = new ScrubCursor(o.secrets, REPLACEMENT)
    return Buffer.concat([c.feed(bytes), c.end()])
  }
  /** The held end of the last message, alone: what the cursor kept, scrubbed as final; `resume`: still the start of what comes next. */
  const flushEnd = (resume: boolean) => {
    if (!holding) return
    clearTimeout(heldEnd)
    heldEnd = undefined
    holding = false
    const tail = Buffer.from(cursor.held)
    send(encodeFrame(true, OP.continuation, cursor.end()))
    if (resume) cursor.resumeAfter(tail)
  }
  const data = (header: FrameHeader, payload: Buffer) => {
    const starts = header.opcode !== OP.continuation
    if (starts === inMessage) return cut("the upstream sent a message frame out of order")
    let out: Buffer
    if (starts && holding) {
      // The last message's end and this one's start, scrubbed as one: its kept bytes close it when unchanged.
      clearTimeout(heldEnd)
      heldEnd = undefined
      holding = false
      // The kept bytes close the last message as they scrub alone, unless a secret runs on into this one.
      const alone = once(cursor.held)
      const joined = cursor.feed(payload)
      const own = joined.subarray(0, alone.length).equals(alone)
      send(encodeFrame(true, OP.continuation, own ? alone : Buffer.alloc(0)))
      out = own ? joined.subarray(alone.length) : joined
    } else out = cursor.feed(payload)
    inMessage = !header.fin
    if (!header.fin) return send(encodeFrame(false, header.opcode, out))
    if (cursor.held.length === 0) return send(encodeFrame(true, header.opcode, out))
    send(encodeFrame(false, header.opcode, out))
    holding = true
    // Bytes let through earlier are still in what is kept (a tiny message): its end goes now, kept as context.
    if (cursor.alreadySent > 0) return flushEnd(true)
    if (cursor.held.length < LONG_HELD) heldEnd = setTimeout(() => flushEnd(true), HOLD_END_MS)
  }
  const emit = (header: FrameHeader, payload: Buffer) => {
    if (!isControl(header.opcode)) return data(header, payload)
    if (header.opcode === OP.close) flushEnd(false)
    const scrubbed = header.opcode === OP.close && payload.length >= 2 ? Buffer.concat([payload.subarray(0, 2), once(payload.subarray(2))]) : once(payload)
    send(encodeFrame(true, header.opcode, scrubbed.subarray(0, 125)))
  }
  const push = (chunk: Buffer) => {
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
  /** The connection is over: a held end has nowhere to go. */
  const stop = () => clearTimeout(heldEnd)
  return { push, flushEnd: () => flushEnd(false), stop }
}

/**
 * The box's frames go on as they came, once read as frames (BoxFrames: anything else cuts the connection),
 * their payloads read on the side for a sentinel, across frames.
 */
const boxFrames = () => {
  const reader = new BoxFrames()
  const scanner = bodyScanner()
  let said = false
  return (chunk: Buffer): { readonly pass: Buffer; readonly sentinel: boolean } | { readonly cut: string } => {
    const read = reader.push(chunk)
    if (!read.ok) return { cut: read.why }
    let found = false
    if (!said) {
      for (const bytes of read.payload) {
        scanner.feed(bytes)
        if (scanner.found()) said = found = true
      }
    }
    return { pass: read.pass, sentinel: found }
  }
}

/** How long a side may keep its half open after the other has ended its own: then both are closed. */
export const HALF_OPEN_MS = 3000

/**
 * A WebSocket both ways after the handshake, until either side closes: the box's frames relayed
 * as sent (and watched for a sentinel), the upstream's scrubbed of the credential. Each side is
 * paused while the other cannot take more. When one side ends, the other is ended too and given
 * HALF_OPEN_MS to close; then both are destroyed, so no connection (nor its audit line) is left
 * half-open by a peer that never answers.
 */
export const relayWebSocket = (box: Duplex, upstream: Duplex, boxHead: Buffer, upHead: Buffer, o: WsRelayOptions) =>
  Effect.async<WsRelayed>((resume) => {
    let up = 0
    let down = 0
    let note: string | undefined
    let done = false
    let lingering: NodeJS.Timeout | undefined
    const finish = () => {
      if (done) return
      done = true
      clearTimeout(lingering)
      fromUpstream.stop()
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
      if (note === undefined && box.writable && !box.write(frame)) upstream.pause()
    }
    const fromUpstream = upstreamFrames(o, toBox, cut)
    const watch = boxFrames()
    const forward = (chunk: Buffer) => {
      if (chunk.length === 0) return
      if (note === undefined && upstream.writable && !upstream.write(chunk)) box.pause()
    }
    // The box's bytes from a sentinel's frame on, while its taint is written (in order, after it).
    let waiting: Array<Buffer> | undefined
    const fromBox = (chunk: Buffer) => {
      up += chunk.length
      if (note !== undefined) return
      const read = watch(chunk)
      if ("cut" in read) return cut(read.cut)
      if (waiting) return void waiting.push(read.pass)
      if (!read.sentinel) return forward(read.pass)
      // The sentinel's frame goes on once the taint is written: nothing the box does next can outrun it.
      waiting = [read.pass]
      box.pause()
      o.onSentinel((ok) => {
        if (!ok) return cut("this run's taint could not be recorded: the frame carrying the sentinel was not sent")
        const queued = waiting ?? []
        waiting = undefined
        for (const c of queued) forward(c)
        box.resume()
      })
    }
    box.on("drain", () => upstream.resume())
    upstream.on("drain", () => waiting === undefined && box.resume())
    upstream.on("data", (chunk: Buffer) => {
      down += chunk.length
      if (note === undefined) fromUpstream.push(chunk)
    })
    box.on("data", fromBox)
    for (const side of [box, upstream]) {
      side.once("close", finish)
      // Every error, not the first only: a socket may emit another while it is torn down.
      side.on("error", finish)
      side.once("end", () => {
        // A message end still held goes before the box hears the upstream is done.
        if (side === upstream && note === undefined) fromUpstream.flushEnd()
        const other = side === box ? upstream : box
        other.end()
        lingering ??= setTimeout(finish, HALF_OPEN_MS)
      })
    }
    if (upHead.length > 0) upstream.unshift(upHead)
    if (boxHead.length > 0) fromBox(boxHead)
    return Effect.sync(finish)
  })
