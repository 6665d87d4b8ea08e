import { Transform, type TransformCallback } from "node:stream"
import { type Scrubbing, scrubbing } from "./secretForms.js"
import { findSpellings } from "./secretMatch.js"

type Range = readonly [number, number]

/** Where each fixed form (base64) occurs in `buf`. */
const fixedRanges = (buf: Buffer, s: Scrubbing): Array<Range> => {
  const out: Array<Range> = []
  for (const form of s.buffers) {
    for (let i = buf.indexOf(form); i >= 0; i = buf.indexOf(form, i + form.length)) out.push([i, i + form.length])
  }
  return out
}

/** The longest suffix of `buf` that a fixed form starts with (and so might complete in the next chunk). */
const fixedTail = (buf: Buffer, s: Scrubbing): number => {
  // Most chunks end in a byte no form has ("}", a newline): nothing to hold.
  if (buf.length === 0 || !s.bytes.has(buf[buf.length - 1] as number)) return 0
  for (let k = Math.min(s.keep, buf.length); k > 0; k--) {
    const tail = buf.subarray(buf.length - k)
    if (s.buffers.some((f) => f.length > k && f.subarray(0, k).equals(tail))) return k
  }
  return 0
}

/**
 * What of `buf` can be let through now, with every spelling of a secret in it replaced: the
 * bytes up to `cut`, and where the rest (kept for the next chunk) begins. Ranges that reach past
 * the cut are judged again with the kept bytes.
 */
const scrubUpTo = (buf: Buffer, s: Scrubbing, replacement: Buffer, atEnd: boolean) => {
  const spelled = findSpellings(buf, s.patterns, atEnd)
  let cut = atEnd ? buf.length : Math.min(spelled.held, buf.length - fixedTail(buf, s))
  const ranges = [...spelled.found, ...fixedRanges(buf, s)].sort((a, b) => a[0] - b[0] || b[1] - a[1])
  // From the last range back, so a range cut short moves the cut before the ranges it overlaps too.
  for (let k = ranges.length - 1; k >= 0; k--) {
    const [from, to] = ranges[k] as Range
    if (from < cut && to > cut) cut = from
  }
  const parts: Array<Buffer> = []
  let at = 0
  for (const [from, to] of ranges) {
    if (to > cut) continue
    if (from < at) {
      // Overlapping forms (a base64 core inside a spelled match): the union goes.
      at = Math.max(at, to)
      continue
    }
    parts.push(buf.subarray(at, from), replacement)
    at = to
  }
  parts.push(buf.subarray(at, cut))
  return { out: parts.length === 1 ? parts[0] as Buffer : Buffer.concat(parts), cut }
}

/**
 * The scrub of one byte stream, chunk by chunk: `feed` gives what may go on now (a tail that
 * could begin a secret is held for the next chunk), `end` what was held, scrubbed as final.
 */
export class ScrubCursor {
  private carry = Buffer.alloc(0)
  private readonly scrubbing: Scrubbing

  constructor(secrets: ReadonlyArray<string>, private readonly replacement: Buffer) {
    this.scrubbing = scrubbing(secrets)
  }

  feed(chunk: Buffer): Buffer {
    const joined = this.carry.length === 0 ? chunk : Buffer.concat([this.carry, chunk])
    const { out, cut } = scrubUpTo(joined, this.scrubbing, this.replacement, false)
    this.carry = Buffer.from(joined.subarray(cut))
    return out
  }

  /** What is held back now: a tail that could begin a secret. */
  get held(): Buffer {
    return this.carry
  }

  end(): Buffer {
    const held = this.carry
    this.carry = Buffer.alloc(0)
    return held.length > 0 ? scrubUpTo(held, this.scrubbing, this.replacement, true).out : held
  }
}

/**
 * Replaces every occurrence of a secret — spelled with each character as itself, `%hh` or
 * `\uhhhh` in any mix (`secretMatch`), or base64 at any alignment — in a byte stream, across
 * chunk boundaries. Only a tail that could be the start of one is held back, so a streamed (SSE)
 * answer still flows event by event. The real credential never reaches the box, even when an
 * upstream echoes it back.
 */
export class Scrub extends Transform {
  private readonly cursor: ScrubCursor

  constructor(secrets: ReadonlyArray<string>, replacement: Buffer) {
    super()
    this.cursor = new ScrubCursor(secrets, replacement)
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback) {
    const out = this.cursor.feed(chunk)
    if (out.length > 0) this.push(out)
    done()
  }

  override _flush(done: TransformCallback) {
    const out = this.cursor.end()
    if (out.length > 0) this.push(out)
    done()
  }
}

/** The same scrub for a whole text (a header value). */
export const scrubText = (text: string, secrets: ReadonlyArray<string>, replacement: string) =>
  scrubUpTo(Buffer.from(text), scrubbing(secrets), Buffer.from(replacement), true).out.toString()
