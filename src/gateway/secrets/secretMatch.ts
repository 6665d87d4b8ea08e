/**
 * Finds a secret written with each of its characters in any of the forms clients and servers
 * produce, in any mix: as itself, as `%hh` per byte (either case; the `%` itself encoded again
 * as `%25` any number of times), as `\uhhhh` (either case, surrogate pairs for the astral planes,
 * its backslash escaped again any number of times), or backslash-escaped where JSON escapes it
 * (`\"`, `\\`, `\/`). A reflecting upstream that encodes only some characters (`sk%2Dant%2d…`,
 * `sk\u002dant…`) is caught as surely as one that encodes all or none; the number of such
 * spellings grows exponentially with the secret's length, so they are matched, not listed.
 */

const PERCENT = 0x25
const BACKSLASH = 0x5c
/**
 * How many times a `%` or a backslash may itself be escaped again: enough for a URL in a URL or
 * JSON in JSON in JSON, and a bound on how much of a stream can be held back waiting.
 */
const MAX_REPEAT = 4

interface SecretChar {
  /** The character's UTF-8 bytes: each may be itself or `%hh`. */
  readonly bytes: ReadonlyArray<number>
  /** Its UTF-16 code units: the whole character may be `\uhhhh` per unit. */
  readonly units: ReadonlyArray<number>
  /** Whether JSON may write it as a backslash and itself. */
  readonly escapable: boolean
}

/** A secret compiled for matching. */
export interface SecretPattern {
  readonly chars: ReadonlyArray<SecretChar>
  /** The bytes a match can begin with. */
  readonly starts: ReadonlyArray<number>
  /**
   * What a spelling's first two bytes can be (searched for natively, so a text's thousands of
   * bytes that merely equal the first are never looked at one by one).
   */
  readonly needles: ReadonlyArray<Buffer>
  /** The first character's one byte and the second's (-1 when either is not one byte): a cheap first look at a candidate. */
  readonly first: number
  readonly second: number
}

export const compileSecret = (secret: string): SecretPattern => {
  const chars = [...secret].map((c): SecretChar => {
    const code = c.codePointAt(0) ?? 0
    const units = code > 0xffff ? [0xd800 + ((code - 0x10000) >> 10), 0xdc00 + ((code - 0x10000) & 0x3ff)] : [code]
    return { bytes: [...Buffer.from(c)], units, escapable: c === `"` || c === "\\" || c === "/" }
  })
  const first = chars[0]
  const starts = first ? [...new Set([first.bytes[0] as number, PERCENT, BACKSLASH])] : []
  const oneByte = (c: SecretChar | undefined) => (c && c.bytes.length === 1 && !c.escapable ? c.bytes[0] as number : -1)
  const [b0, b1] = [oneByte(first), oneByte(chars[1])]
  const pair = (a: number, b: number) => Buffer.from([a, b])
  const needles = b0 < 0 || b1 < 0
    ? starts.map((b) => Buffer.from([b]))
    : [
      pair(b0, b1), pair(b0, PERCENT), pair(b0, BACKSLASH),
      pair(PERCENT, 0x32), ...[...new Set([(b0 >> 4).toString(16), (b0 >> 4).toString(16).toUpperCase()])].map((h) => pair(PERCENT, h.charCodeAt(0))),
      pair(BACKSLASH, 0x75), pair(BACKSLASH, 0x55), pair(BACKSLASH, BACKSLASH)
    ]
  return { chars, starts, needles: [...new Map(needles.map((n) => [n.toString("latin1"), n])).values()], first: b0, second: b1 }
}

/**
 * Whether a spelling surely cannot start at `i`, from its first two bytes — most candidates in a
 * text (every "r" of a JSON body, for "roster-…") are ruled out here without a call to matchAt.
 */
const ruledOut = (buf: Uint8Array, i: number, p: SecretPattern) => {
  if (p.first < 0) return false
  const b = buf[i]
  const n = buf[i + 1]
  if (n === undefined) return false
  if (b === p.first) return !(p.second < 0 || n === p.second || n === PERCENT || n === BACKSLASH)
  // "%7…" for a first byte 0x7_, or "%2…" (its % itself encoded again).
  if (b === PERCENT) return n !== 0x32 && hexValue(n) !== p.first >> 4
  if (b === BACKSLASH) return !(n === 0x75 || n === 0x55 || n === BACKSLASH)
  return true
}

const hexValue = (b: number | undefined) =>
  b === undefined ? -2 : b >= 0x30 && b <= 0x39 ? b - 0x30 : b >= 0x41 && b <= 0x46 ? b - 0x37 : b >= 0x61 && b <= 0x66 ? b - 0x57 : -1

/** A match ran past the end of the buffer while it still held: the rest may come in the next chunk. */
export const PARTIAL = -2
const NONE = -1

/**
 * `%hh` at q spelling byte b, its `%` itself percent-encoded any number of times (`%252D`, a URL
 * inside a URL): every end found, and PARTIAL when the buffer ends inside one.
 */
const percentEnds = (buf: Uint8Array, q: number, b: number, out: Array<number>) => {
  if (buf[q] !== PERCENT) return
  for (let at = q + 1, n = 0; n <= MAX_REPEAT; at += 2, n++) {
    const hi = hexValue(buf[at])
    if (hi === -2) return void out.push(PARTIAL)
    if (hi < 0) return
    const lo = hexValue(buf[at + 1])
    if (lo === -2) return void out.push(PARTIAL)
    if (lo < 0) return
    if (hi * 16 + lo === b) out.push(at + 2)
    // "25" is an encoded "%": what follows may be the byte's hex once more.
    if (hi !== 2 || lo !== 5) return
  }
}

/** `\uhhhh` at q spelling unit u; its backslash may itself be escaped any number of times (`\\u002d`, JSON in JSON). */
const unicodeAt = (buf: Uint8Array, q: number, u: number) => {
  if (buf[q] !== BACKSLASH) return NONE
  let at = q + 1
  while (buf[at] === BACKSLASH && at - q <= MAX_REPEAT) at++
  const letter = buf[at]
  if (letter === undefined) return PARTIAL
  if (letter !== 0x75 && letter !== 0x55) return NONE
  let v = 0
  for (let k = 0; k < 4; k++) {
    const h = hexValue(buf[at + 1 + k])
    if (h === -2) return PARTIAL
    if (h < 0) return NONE
    v = v * 16 + h
    // The digits so far already differ from the unit's: no need to read the rest.
    if (v !== u >> (4 * (3 - k))) return NONE
  }
  return at + 5
}

/** Every place the spelling of char `c` starting at q can end (PARTIAL among them when the buffer runs out). */
const charEnds = (buf: Uint8Array, q: number, c: SecretChar, out: Array<number>) => {
  if (q >= buf.length) return void out.push(PARTIAL)
  // Byte by byte, each itself or %hh (a multi-byte character may mix them).
  let fronts = [q]
  for (const b of c.bytes) {
    const next: Array<number> = []
    for (const f of fronts) {
      if (f >= buf.length) {
        next.push(PARTIAL)
        continue
      }
      if (buf[f] === b) next.push(f + 1)
      percentEnds(buf, f, b, next)
    }
    fronts = next.filter((f) => f !== PARTIAL)
    if (next.includes(PARTIAL)) out.push(PARTIAL)
    if (fronts.length === 0) break
  }
  out.push(...fronts)
  // The whole character as \u escapes.
  let at = q
  for (const u of c.units) {
    at = unicodeAt(buf, at, u)
    if (at < 0) break
  }
  if (at !== NONE) out.push(at)
  if (c.escapable && buf[q] === BACKSLASH) {
    if (q + 1 >= buf.length) out.push(PARTIAL)
    else if (buf[q + 1] === c.bytes[0]) out.push(q + 2)
  }
}

/**
 * The spelling of characters `ci..` of the secret starting at `q`: the end of the first full
 * spelling, PARTIAL when the buffer ends inside one that still holds, or NONE. Depth-first; a
 * one-byte character (a credential's usual kind) is tried without allocating, so the common case
 * — a candidate that fails at its first or second character — costs a few comparisons.
 */
const matchFrom = (buf: Uint8Array, q: number, p: SecretPattern, ci: number): number => {
  if (ci === p.chars.length) return q
  if (q >= buf.length) return PARTIAL
  const c = p.chars[ci] as SecretChar
  let partial = false
  const then = (e: number) => {
    const r = matchFrom(buf, e, p, ci + 1)
    if (r === PARTIAL) partial = true
    return r
  }
  if (c.bytes.length === 1) {
    const b = c.bytes[0] as number
    const at = buf[q]
    if (at === b) {
      const r = then(q + 1)
      if (r >= 0) return r
    }
    if (at === PERCENT) {
      for (let a = q + 1, n = 0; n <= MAX_REPEAT; a += 2, n++) {
        const hi = hexValue(buf[a])
        const lo = hi < 0 ? -1 : hexValue(buf[a + 1])
        if (hi === -2 || lo === -2) {
          partial = true
          break
        }
        if (hi < 0 || lo < 0) break
        if (hi * 16 + lo === b) {
          const r = then(a + 2)
          if (r >= 0) return r
        }
        if (hi !== 2 || lo !== 5) break
      }
    }
    if (at === BACKSLASH) {
      const u = unicodeAt(buf, q, c.units[0] as number)
      if (u === PARTIAL) partial = true
      else if (u >= 0) {
        const r = then(u)
        if (r >= 0) return r
      }
      if (c.escapable) {
        if (q + 1 >= buf.length) partial = true
        else if (buf[q + 1] === b) {
          const r = then(q + 2)
          if (r >= 0) return r
        }
      }
    }
    return partial ? PARTIAL : NONE
  }
  const ends: Array<number> = []
  charEnds(buf, q, c, ends)
  for (const e of ends) {
    if (e === PARTIAL) {
      partial = true
      continue
    }
    const r = then(e)
    if (r >= 0) return r
  }
  return partial ? PARTIAL : NONE
}

/**
 * Whether the secret is spelled at `pos`: the end of the first full spelling, PARTIAL when the
 * buffer ends inside one that still holds, or NONE.
 */
export const matchAt = (buf: Uint8Array, pos: number, p: SecretPattern): number => matchFrom(buf, pos, p, 0)

/**
 * Every full spelling of any secret in `buf`, as [start, end) ranges in order, without overlap;
 * and where a spelling begins that the buffer cuts short (`held`: from there on must wait for
 * more bytes before it can be judged), or `buf.length` when none does. At the end of a stream
 * (`atEnd`) nothing is held.
 */
// A set of patterns is compiled once and searched many times (every chunk, every header).
const needleSets = new WeakMap<ReadonlyArray<SecretPattern>, ReadonlyArray<Buffer>>()
const needlesOf = (patterns: ReadonlyArray<SecretPattern>) => {
  const known = needleSets.get(patterns)
  if (known) return known
  const made = [...new Map(patterns.flatMap((p) => p.needles).map((n) => [n.toString("latin1"), n])).values()]
  needleSets.set(patterns, made)
  return made
}

export const findSpellings = (buf: Uint8Array, patterns: ReadonlyArray<SecretPattern>, atEnd: boolean) => {
  const found: Array<readonly [number, number]> = []
  // Candidates are found natively (indexOf of each two-byte start); each needle's next place is
  // looked up again only once the scan has passed it. A buffer's last byte may start a spelling
  // on its own: it is judged by matchAt, which says PARTIAL when the buffer ends inside one.
  const needles = needlesOf(patterns)
  const lastByteStarts = patterns.some((p) => p.starts.includes(buf[buf.length - 1] as number))
  const view = Buffer.isBuffer(buf) ? buf : Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength)
  const next = needles.map(() => -1)
  let from = 0
  for (;;) {
    let start = -1
    for (let k = 0; k < needles.length; k++) {
      let i = next[k] as number
      if (i < from && i !== Infinity) {
        const at = view.indexOf(needles[k] as Buffer, from)
        i = at < 0 ? Infinity : at
        next[k] = i
      }
      if (i !== Infinity && (start < 0 || i < start)) start = i
    }
    if (start < 0) {
      if (!lastByteStarts || from > buf.length - 1 || atEnd) return { found, held: buf.length }
      start = buf.length - 1
    }
    let end = NONE
    let partial = false
    for (const p of patterns) {
      if (ruledOut(buf, start, p)) continue
      const m = matchAt(buf, start, p)
      if (m >= 0) end = Math.max(end, m)
      else if (m === PARTIAL) partial = true
    }
    if (end >= 0) {
      found.push([start, end])
      from = end
    } else if (partial && !atEnd) {
      // Everything from here is judged again with the next chunk.
      return { found, held: start }
    } else {
      from = start + 1
    }
  }
}
