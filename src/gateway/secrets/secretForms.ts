import { compileSecret, type SecretPattern } from "./secretMatch.js"

/** Encoded forms shorter than this are not scrubbed: too short to be the secret rather than ordinary text. */
const MIN_FORM = 8

/**
 * The secret's bytes as base64 at each of the three alignments it can have inside a longer encoded
 * text: only the characters that come from the secret's bits alone (the edges depend on its
 * neighbours), standard and URL-safe alphabets.
 */
const base64Cores = (bytes: Buffer) => {
  const out: Array<string> = []
  for (let align = 0; align < 3; align++) {
    const encoded = Buffer.concat([Buffer.alloc(align), bytes, Buffer.alloc(3)]).toString("base64")
    const from = Math.ceil((8 * align) / 6)
    const to = Math.floor((8 * (align + bytes.length)) / 6)
    const core = encoded.slice(from, to)
    out.push(core, core.replace(/\+/g, "-").replace(/\//g, "_"))
  }
  return out
}

/**
 * The forms of a secret that are found as fixed strings: base64 at any alignment in both
 * alphabets. Every spelling of its characters as themselves, `%hh` or `\uhhhh` (in any mix) is
 * matched by `secretMatch` instead: there are too many to list.
 */
export const fixedForms = (secret: string): ReadonlyArray<string> => {
  if (secret === "") return []
  return [...new Set(base64Cores(Buffer.from(secret)))].filter((f) => f.length >= MIN_FORM)
}

/** What a scrubber needs of a set of secrets, worked out once per set (see `scrubbing`). */
export interface Scrubbing {
  /** Each secret, matched in every spelling of its characters. */
  readonly patterns: ReadonlyArray<SecretPattern>
  /** The fixed forms (base64), as bytes. */
  readonly buffers: ReadonlyArray<Buffer>
  /** The longest fixed form, less one: the most a stream holds back for those. */
  readonly keep: number
  /** Every byte any fixed form has: a chunk that ends in none of them cannot end with such a form's start. */
  readonly bytes: ReadonlySet<number>
}

// The same credential is scrubbed from every answer of every request that injects it: its forms
// are worked out once (a handful of connections, so a few entries), not per request and header.
const known = new Map<string, Scrubbing>()

/** What the scrubbers need of a set of secrets. */
export const scrubbing = (secrets: ReadonlyArray<string>): Scrubbing => {
  const key = secrets.join("\0")
  const hit = known.get(key)
  if (hit) return hit
  const patterns = [...new Set(secrets)].filter((x) => x !== "").map(compileSecret)
  const buffers = [...new Set(secrets.flatMap(fixedForms))].map((f) => Buffer.from(f))
  const made = { patterns, buffers, keep: Math.max(0, ...buffers.map((b) => b.length - 1)), bytes: new Set(buffers.flatMap((b) => [...b])) }
  if (known.size >= 64) known.clear()
  known.set(key, made)
  return made
}
