/**
 * WebSocket framing (RFC 6455 §5), as far as the gateway reads and writes it: a reader that
 * takes bytes as they come and gives each frame's header, its payload unmasked and its end, and
 * the encoding of an unmasked frame (what a server sends).
 */
export const OP = { continuation: 0, text: 1, binary: 2, close: 8, ping: 9, pong: 10 } as const

export interface FrameHeader {
  readonly fin: boolean
  /** RSV1–3: non-zero only under a negotiated extension (permessage-deflate), which the gateway never lets through. */
  readonly rsv: number
  readonly opcode: number
  readonly length: number
}

export type FrameEvent =
  | { readonly _tag: "Header"; readonly header: FrameHeader }
  | { readonly _tag: "Payload"; readonly bytes: Buffer }
  | { readonly _tag: "End" }

export const isControl = (opcode: number) => opcode >= 8

/**
 * A frame's payload length and where what follows it starts (its mask, or its payload), from the bytes
 * of its header so far: undefined while they are not all in, null for a length no frame can have (2^53).
 */
const payloadLength = (p: Buffer): { readonly length: number; readonly at: number } | undefined | null => {
  const short = (p[1] as number) & 0x7f
  if (short < 126) return { length: short, at: 2 }
  if (short === 126) return p.length < 4 ? undefined : { length: p.readUInt16BE(2), at: 4 }
  if (p.length < 10) return undefined
  const big = p.readBigUInt64BE(2)
  return big > BigInt(Number.MAX_SAFE_INTEGER) ? null : { length: Number(big), at: 10 }
}

/** Reads frames from a byte stream in any chunking; a payload is given as it arrives, unmasked. */
export class FrameReader {
  private pending: Buffer = Buffer.alloc(0)
  private remaining = 0
  private inPayload = false
  private mask: Buffer | undefined
  private maskAt = 0

  /** Every event the bytes complete, in order; a length over 2^53 is refused (false). */
  push(chunk: Buffer, on: (e: FrameEvent) => void): boolean {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk])
    for (;;) {
      if (this.inPayload) {
        if (this.remaining > 0) {
          if (this.pending.length === 0) return true
          const take = Math.min(this.remaining, this.pending.length)
          const bytes = Buffer.from(this.pending.subarray(0, take))
          this.pending = this.pending.subarray(take)
          this.remaining -= take
          if (this.mask) for (let i = 0; i < bytes.length; i++) bytes[i] = (bytes[i] as number) ^ (this.mask[(this.maskAt + i) & 3] as number)
          this.maskAt += take
          on({ _tag: "Payload", bytes })
          if (this.remaining > 0) return true
        }
        this.inPayload = false
        on({ _tag: "End" })
      }
      const header = this.readHeader()
      if (header === undefined) return true
      if (header === null) return false
      on({ _tag: "Header", header })
      this.inPayload = true
    }
  }

  /** The next header when its bytes are all in (undefined: not yet; null: not a frame roster can read). */
  private readHeader(): FrameHeader | undefined | null {
    const p = this.pending
    if (p.length < 2) return undefined
    const b0 = p[0] as number
    const b1 = p[1] as number
    const masked = (b1 & 0x80) !== 0
    const sized = payloadLength(p)
    if (sized === undefined || sized === null) return sized
    const { length, at } = sized
    if (masked && p.length < at + 4) return undefined
    this.mask = masked ? Buffer.from(p.subarray(at, at + 4)) : undefined
    this.maskAt = 0
    this.pending = p.subarray(at + (masked ? 4 : 0))
    this.remaining = length
    return { fin: (b0 & 0x80) !== 0, rsv: (b0 >> 4) & 0x7, opcode: b0 & 0x0f, length }
  }
}

/** One unmasked frame, as a server sends it. */
export const encodeFrame = (fin: boolean, opcode: number, payload: Buffer): Buffer => {
  const n = payload.length
  const head = n < 126 ? Buffer.alloc(2) : n < 0x10000 ? Buffer.alloc(4) : Buffer.alloc(10)
  head[0] = (fin ? 0x80 : 0) | opcode
  if (n < 126) head[1] = n
  else if (n < 0x10000) {
    head[1] = 126
    head.writeUInt16BE(n, 2)
  } else {
    head[1] = 127
    head.writeBigUInt64BE(BigInt(n), 2)
  }
  return Buffer.concat([head, payload])
}

const OPCODES: ReadonlySet<number> = new Set([OP.continuation, OP.text, OP.binary, OP.close, OP.ping, OP.pong])

/** What a chunk of the box's side comes to: the bytes that may go on (whole frame headers, payload as it comes) and the payload unmasked. */
export type BoxRead =
  | { readonly ok: true; readonly pass: Buffer; readonly payload: ReadonlyArray<Buffer> }
  | { readonly ok: false; readonly why: string }

/**
 * The box's side of an upgraded connection, read as the frames a WebSocket client sends (RFC 6455 §5) and
 * nothing else: each masked, no RSV bit (no extension was negotiated), a known opcode, a control frame
 * whole and short, a continuation only inside a message. Only the bytes of frames so read go on — a
 * header once it is whole and checked, its payload as it comes — so a plain HTTP request, or any other
 * bytes written into the upgraded stream, never reaches the upstream: the first such byte cuts it.
 */
export class BoxFrames {
  private pending: Buffer = Buffer.alloc(0)
  private remaining = 0
  private mask: Buffer = Buffer.alloc(4)
  private maskAt = 0
  private inMessage = false
  private broken: string | undefined

  push(chunk: Buffer): BoxRead {
    if (this.broken) return { ok: false, why: this.broken }
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk])
    const pass: Array<Buffer> = []
    const payload: Array<Buffer> = []
    for (;;) {
      if (this.remaining > 0) {
        if (this.pending.length === 0) break
        const take = Math.min(this.remaining, this.pending.length)
        const raw = this.pending.subarray(0, take)
        this.pending = this.pending.subarray(take)
        this.remaining -= take
        pass.push(raw)
        const plain = Buffer.from(raw)
        for (let i = 0; i < plain.length; i++) plain[i] = (plain[i] as number) ^ (this.mask[(this.maskAt + i) & 3] as number)
        this.maskAt += take
        payload.push(plain)
        continue
      }
      const head = this.header()
      if (head === undefined) break
      if (typeof head === "string") {
        this.broken = head
        return { ok: false, why: head }
      }
      pass.push(head)
    }
    return { ok: true, pass: Buffer.concat(pass), payload }
  }

  /** The next frame's header, when whole: its bytes (checked), a reason it is not a client frame, or undefined (not yet whole). */
  private header(): Buffer | string | undefined {
    const p = this.pending
    if (p.length < 2) return undefined
    const b0 = p[0] as number
    const b1 = p[1] as number
    const fin = (b0 & 0x80) !== 0
    const opcode = b0 & 0x0f
    if ((b0 & 0x70) !== 0) return "the box sent a frame with RSV bits set (no extension was negotiated), or bytes that are not a frame"
    if (!OPCODES.has(opcode)) return `the box sent bytes that are not a WebSocket frame (opcode ${opcode})`
    if ((b1 & 0x80) === 0) return "the box sent an unmasked frame (a client masks every frame), or bytes that are not a frame"
    const sized = payloadLength(p)
    if (sized === undefined) return undefined
    if (sized === null) return "the box sent a frame longer than a frame can be"
    const { length, at } = sized
    if (p.length < at + 4) return undefined
    if (isControl(opcode) && (!fin || length > 125)) return "the box sent a control frame that is fragmented or over 125 bytes"
    if (opcode === OP.continuation ? !this.inMessage : !isControl(opcode) && this.inMessage) {
      return "the box sent a message frame out of order"
    }
    if (!isControl(opcode)) this.inMessage = !fin
    this.mask = Buffer.from(p.subarray(at, at + 4))
    this.maskAt = 0
    this.remaining = length
    const bytes = p.subarray(0, at + 4)
    this.pending = p.subarray(at + 4)
    return bytes
  }
}
