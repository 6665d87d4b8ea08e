/**
 * One canonical form of a request's path, so a request can never mean one thing to the policy and another
 * to the upstream: the request target's path is percent-decoded once, its repeated slashes folded and its
 * dot-segments resolved; the rules see that decoded path, and the upstream gets the same path encoded again
 * (the query, not part of the path, goes on as sent). What has no single meaning is refused instead: an
 * encoded "/" or "\", a NUL or other control character, a malformed escape, bytes that are not UTF-8, a
 * target that is not a path, and a ";" in a segment — servlet containers (Tomcat, Jetty, Spring) cut a
 * segment's ";parameters" before routing, so `/repos/acme/..;/..;/orgs/x` is `/orgs/x` to them.
 */
export type CanonicalTarget =
  | { readonly ok: true; readonly path: string; readonly url: string }
  | { readonly ok: false; readonly why: string }

const HEX = /^[0-9A-Fa-f]{2}$/
const utf8 = new TextDecoder("utf-8", { fatal: true })
// RFC 3986's pchar, minus "%": sent as is; everything else of a segment is escaped.
const PCHAR = /[A-Za-z0-9\-._~!$&'()*+,=:@]/

/** The path's bytes, each escape decoded once; a string saying why when it has no single meaning. */
const decodeOnce = (raw: string): string | { readonly why: string } => {
  const bytes: Array<number> = []
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i)
    if (c === 0x25) {
      const hex = raw.slice(i + 1, i + 3)
      if (!HEX.test(hex)) return { why: `a malformed escape ("%${hex}")` }
      const b = parseInt(hex, 16)
      if (b === 0x2f) return { why: "an encoded slash (%2F): the upstream could read it as a separator the policy did not see" }
      if (b === 0x5c) return { why: "an encoded backslash (%5C): some upstreams read it as a separator" }
      if (b < 0x20 || b === 0x7f) return { why: `an encoded control character (%${hex.toUpperCase()})` }
      bytes.push(b)
      i += 2
    } else if (c === 0x5c) {
      return { why: "a backslash: some upstreams read it as a separator" }
    } else if (c < 0x21 || c >= 0x7f) {
      return { why: "a character a request target cannot hold unescaped" }
    } else {
      bytes.push(c)
    }
  }
  try {
    return utf8.decode(Uint8Array.from(bytes))
  } catch {
    return { why: "escapes that are not UTF-8" }
  }
}

const encodeSegment = (segment: string) => {
  let out = ""
  for (const ch of segment) {
    out += PCHAR.test(ch) ? ch : [...Buffer.from(ch, "utf8")].map((b) => `%${b.toString(16).toUpperCase().padStart(2, "0")}`).join("")
  }
  return out
}

// A path of plain characters (no escape, no ";"), without "//" or a "." or ".." segment, is its own canonical form.
const PLAIN_PATH = /^[A-Za-z0-9\-._~!$&'()*+,=:@/]*$/
const UNFOLDED = /\/\/|\/\.\.?(?:\/|$)/

/** The canonical form of a request target (origin-form: "/path?query"). */
export const canonicalTarget = (target: string): CanonicalTarget => {
  if (!target.startsWith("/")) return { ok: false, why: "the request target is not a path" }
  if (target.includes("#")) return { ok: false, why: "a fragment, which a request never carries" }
  const q = target.indexOf("?")
  // The common request, already canonical: decoding and encoding again would give it back as it is.
  const asSent = q < 0 ? target : target.slice(0, q)
  if (PLAIN_PATH.test(asSent) && !UNFOLDED.test(asSent)) return { ok: true, path: asSent, url: target }
  const decoded = decodeOnce(asSent)
  if (typeof decoded !== "string") return { ok: false, why: decoded.why }
  if (decoded.includes(";")) return { ok: false, why: `a ";" in a path segment (servlet upstreams cut ";…" from a segment before routing: "..;" is "..")` }
  const raw = decoded.slice(1).split("/")
  const segments: Array<string> = []
  let trailing = false
  for (const [i, s] of raw.entries()) {
    const last = i === raw.length - 1
    if (s === "" || s === ".") {
      trailing = last
    } else if (s === "..") {
      segments.pop()
      trailing = last
    } else {
      segments.push(s)
      trailing = false
    }
  }
  const tail = trailing && segments.length > 0 ? "/" : ""
  return {
    ok: true,
    path: `/${segments.join("/")}${tail}`,
    url: `/${segments.map(encodeSegment).join("/")}${tail}${q < 0 ? "" : target.slice(q)}`
  }
}
