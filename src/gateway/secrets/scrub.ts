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
  let first = -1
  for (const [from, to] of ranges) {
    if (to > cut) continue
    if (from < at) {
      // Overlapping forms (a base64 core inside a spelled match): the union goes.
      at = Math.max(at, to)
      continue
    }
    if (first < 0) first = from
    parts.push(buf.subarray(at, from), replacement)
    at = to
  }
  parts.push(buf.subarray(at, cut))
  // `first`: where the first replacement begins (the output is the input up to there).
  return { out: parts.length === 1 ? parts[0] as Buffer : Buffer.concat(parts), cut, first }
}

/**
 * The scrub of one byte stream, chunk by chunk: `feed` gives what may go on now (a tail that
 * could begin a secret is held for the next chunk), `end` what was held, scrubbed as final.
 */
export class ScrubCursor {
  private carry = Buffer.alloc(0)
  /** How many bytes at the head of the carry were sent already (see resumeAfter). */
  private sent = 0
  private readonly scrubbing: Scrubbing

  constructor(secrets: ReadonlyArray<string>, private readonly replacement: Buffer) {
    this.scrubbing = scrubbing(secrets)
  }

  feed(chunk: Buffer): Buffer {
    const joined = this.carry.length === 0 ? chunk : Buffer.concat([this.carry, chunk])
    const scrubbed = scrubUpTo(joined, this.scrubbing, this.replacement, false)
    this.carry = Buffer.from(joined.subarray(scrubbed.cut))
    return this.unsent(scrubbed)
  }

  /**
   * Goes on after `tail` was let through as it was (a held end that could wait no longer): it is
   * the start of what the next bytes are judged with, and is not sent again — but a secret that
   * began in it and runs on into them is still replaced, from where it began. The receiver gets
   * the few bytes it already had and the replacement: never two pieces it can join.
   */
  resumeAfter(tail: Buffer) {
    this.carry = Buffer.from(tail)
    this.sent = tail.length
  }

  /** The output less what was sent already: up to the first replacement when one begins among those bytes. */
  private unsent(s: { readonly out: Buffer; readonly cut: number; readonly first: number }): Buffer {
    if (this.sent === 0) return s.out
    if (s.first >= 0 && s.first < this.sent) {
      this.sent = 0
      return s.out.subarray(s.first)
    }
    const done = Math.min(this.sent, s.cut)
    this.sent -= done
    return s.out.subarray(done)
  }

  /** How many bytes of `held` were let through already (after resumeAfter). */
  get alreadySent(): number {
    return this.sent
  }

  /** What is held back now: a tail that could begin a secret. */
  get held(): Buffer {
    return this.carry
  }

  end(): Buffer {
    const held = this.carry
    this.carry = Buffer.alloc(0)
    const out = held.length > 0 ? this.unsent(scrubUpTo(held, this.scrubbing, this.replacement, true)) : held
    this.sent = 0
    return out
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
