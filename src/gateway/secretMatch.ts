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
}

export const compileSecret = (secret: string): SecretPattern => {
  const chars = [...secret].map((c): SecretChar => {
    const code = c.codePointAt(0) ?? 0
    const units = code > 0xffff ? [0xd800 + ((code - 0x10000) >> 10), 0xdc00 + ((code - 0x10000) & 0x3ff)] : [code]
    return { bytes: [...Buffer.from(c)], units, escapable: c === `"` || c === "\\" || c === "/" }
  })
  const first = chars[0]
  const starts = first ? [...new Set([first.bytes[0] as number, PERCENT, BACKSLASH])] : []
  return { chars, starts }
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
 * Whether the secret is spelled at `pos`: the end of the first full spelling, PARTIAL when the
 * buffer ends inside one that still holds, or NONE.
 */
export const matchAt = (buf: Uint8Array, pos: number, p: SecretPattern): number => {
  let partial = false
  // Depth-first over the spellings; each character has at most a few, and they rarely overlap.
  const stack: Array<[number, number]> = [[pos, 0]]
  const ends: Array<number> = []
  while (stack.length > 0) {
    const [q, ci] = stack.pop() as [number, number]
    if (ci === p.chars.length) return q
    ends.length = 0
    charEnds(buf, q, p.chars[ci] as SecretChar, ends)
    for (let k = ends.length - 1; k >= 0; k--) {
      const e = ends[k] as number
      if (e === PARTIAL) partial = true
      else stack.push([e, ci + 1])
    }
  }
  return partial ? PARTIAL : NONE
}

/**
 * Every full spelling of any secret in `buf`, as [start, end) ranges in order, without overlap;
 * and where a spelling begins that the buffer cuts short (`held`: from there on must wait for
 * more bytes before it can be judged), or `buf.length` when none does. At the end of a stream
 * (`atEnd`) nothing is held.
 */
export const findSpellings = (buf: Uint8Array, patterns: ReadonlyArray<SecretPattern>, atEnd: boolean) => {
  const found: Array<readonly [number, number]> = []
  // The next place each start byte occurs, looked up again only once the scan has passed it.
  const starts = [...new Set(patterns.flatMap((p) => p.starts))]
  const next = starts.map(() => -1)
  let from = 0
  for (;;) {
    let start = -1
    for (let k = 0; k < starts.length; k++) {
      if ((next[k] as number) < from && next[k] !== Infinity) {
        const i = buf.indexOf(starts[k] as number, from)
        next[k] = i < 0 ? Infinity : i
      }
      const i = next[k] as number
      if (i !== Infinity && (start < 0 || i < start)) start = i
    }
    if (start < 0) return { found, held: buf.length }
    let end = NONE
    let partial = false
    for (const p of patterns) {
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
