import { Transform, type TransformCallback } from "node:stream"
import { allForms, scrubbing } from "./secretForms.js"

/**
 * Replaces every occurrence of a secret — in every form `secretForms` knows (JSON-escaped,
 * percent-encoded, base64 at any alignment) — in a byte stream, across chunk boundaries. Only a
 * tail that could be the start of one is held back, so a streamed (SSE) answer still flows event
 * by event. The real credential never reaches the box, even when an upstream echoes it back.
 */
export class Scrub extends Transform {
  private carry = Buffer.alloc(0)
  private readonly secrets: ReadonlyArray<Buffer>
  private readonly keep: number
  private readonly bytes: ReadonlySet<number>

  constructor(secrets: ReadonlyArray<string>, private readonly replacement: Buffer) {
    super()
    const s = scrubbing(secrets)
    this.secrets = s.buffers
    this.keep = s.keep
    this.bytes = s.bytes
  }

  private replaceAll(buf: Buffer): Buffer {
    let out = buf
    for (const secret of this.secrets) {
      let i = out.indexOf(secret)
      if (i < 0) continue
      const parts: Array<Buffer> = []
      let from = 0
      while (i >= 0) {
        parts.push(out.subarray(from, i), this.replacement)
        from = i + secret.length
        i = out.indexOf(secret, from)
      }
      parts.push(out.subarray(from))
      out = Buffer.concat(parts)
    }
    return out
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback) {
    const joined = this.replaceAll(this.carry.length === 0 ? chunk : Buffer.concat([this.carry, chunk]))
    const cut = joined.length - this.heldTail(joined)
    this.carry = Buffer.from(joined.subarray(cut))
    if (cut > 0) this.push(joined.subarray(0, cut))
    done()
  }

  /** The longest suffix of `buf` that a secret starts with (and so might complete in the next chunk). */
  private heldTail(buf: Buffer): number {
    // Most chunks end in a byte no form has ("}", a newline): nothing to hold.
    if (buf.length === 0 || !this.bytes.has(buf[buf.length - 1] as number)) return 0
    for (let k = Math.min(this.keep, buf.length); k > 0; k--) {
      const tail = buf.subarray(buf.length - k)
      if (this.secrets.some((s) => s.length > k && s.subarray(0, k).equals(tail))) return k
    }
    return 0
  }

  override _flush(done: TransformCallback) {
    if (this.carry.length > 0) this.push(this.replaceAll(this.carry))
    done()
  }
}

/** The same scrub for a whole text (a header value). */
export const scrubText = (text: string, secrets: ReadonlyArray<string>, replacement: string) =>
  allForms(secrets).reduce((t, s) => t.split(s).join(replacement), text)
