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
    let length = b1 & 0x7f
    let at = 2
    if (length === 126) {
      if (p.length < 4) return undefined
      length = p.readUInt16BE(2)
      at = 4
    } else if (length === 127) {
      if (p.length < 10) return undefined
      const big = p.readBigUInt64BE(2)
      if (big > BigInt(Number.MAX_SAFE_INTEGER)) return null
      length = Number(big)
      at = 10
    }
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
