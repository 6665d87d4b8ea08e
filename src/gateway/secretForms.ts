/** Encoded forms shorter than this are not scrubbed: too short to be the secret rather than ordinary text. */
const MIN_FORM = 8

const percentEscapes = (bytes: Buffer, upper: boolean) =>
  [...bytes].map((b) => {
    const hex = b.toString(16).padStart(2, "0")
    return `%${upper ? hex.toUpperCase() : hex}`
  }).join("")

const unicodeEscapes = (text: string, upper: boolean) =>
  [...text].map((c) => {
    const code = c.codePointAt(0) ?? 0
    const units = code > 0xffff ? [0xd800 + ((code - 0x10000) >> 10), 0xdc00 + ((code - 0x10000) & 0x3ff)] : [code]
    return units.map((u) => `\\u${u.toString(16).padStart(4, "0")}`).join("")
  }).join("").replace(/\\u([0-9a-f]{4})/g, (_, h: string) => `\\u${upper ? h.toUpperCase() : h}`)

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
 * Every form in which an upstream may reflect a secret back that roster scrubs: the value itself,
 * JSON-escaped (as written, and every character as \u), percent-encoded (as a URL component, and
 * every byte as %XX in either case), and base64 at any alignment in both alphabets. A hostile
 * upstream can always invent another encoding; these are the ones clients and servers produce.
 */
export const secretForms = (secret: string): ReadonlyArray<string> => {
  if (secret === "") return []
  const bytes = Buffer.from(secret)
  const forms = [
    secret,
    JSON.stringify(secret).slice(1, -1),
    unicodeEscapes(secret, false),
    unicodeEscapes(secret, true),
    encodeURIComponent(secret),
    percentEscapes(bytes, false),
    percentEscapes(bytes, true),
    ...base64Cores(bytes)
  ]
  return [...new Set(forms)].filter((f) => f === secret || f.length >= MIN_FORM)
}

/** What a scrubber needs of a set of secrets, worked out once per set (see `scrubbing`). */
export interface Scrubbing {
  readonly forms: ReadonlyArray<string>
  readonly buffers: ReadonlyArray<Buffer>
  /** The longest form, less one: the most a stream ever holds back. */
  readonly keep: number
  /** Every byte any form has: a chunk that ends in none of them cannot end with a form's start. */
  readonly bytes: ReadonlySet<number>
}

// The same credential is scrubbed from every answer of every request that injects it: its forms
// are worked out once (a handful of connections, so a few entries), not per request and header.
const known = new Map<string, Scrubbing>()

/** The forms of every secret, with what the stream scrubber needs of them. */
export const scrubbing = (secrets: ReadonlyArray<string>): Scrubbing => {
  const key = secrets.join("\0")
  const hit = known.get(key)
  if (hit) return hit
  const forms = [...new Set(secrets.flatMap(secretForms))]
  const buffers = forms.map((f) => Buffer.from(f))
  const made = { forms, buffers, keep: Math.max(0, ...buffers.map((b) => b.length - 1)), bytes: new Set(buffers.flatMap((b) => [...b])) }
  if (known.size >= 64) known.clear()
  known.set(key, made)
  return made
}

/** The forms of every secret, for the scrubbers. */
export const allForms = (secrets: ReadonlyArray<string>) => scrubbing(secrets).forms
