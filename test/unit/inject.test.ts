import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { Readable } from "node:stream"
import { SENTINEL } from "../../src/contract/constants.js"
import { sentinelJwt } from "../../src/box/sentinel.js"
import { injectCredential, isSentinel } from "../../src/gateway/secrets/inject.js"
import { Scrub, scrubText } from "../../src/gateway/secrets/scrub.js"

const REAL = "sk-ant-REAL-0123456789"

describe("injection", () => {
  it("recognises every sentinel form the provisioner writes, and nothing else", () => {
    expect(isSentinel(SENTINEL)).toBe(true)
    expect(isSentinel(sentinelJwt(Date.now()))).toBe(true)
    expect(isSentinel("a.b.c")).toBe(false)
    expect(isSentinel(`${SENTINEL}x`)).toBe(false)
    expect(isSentinel(REAL)).toBe(false)
  })

  it("x-api-key: only that header, only when it holds the sentinel", () => {
    const r = injectCredential({ "x-api-key": SENTINEL, authorization: `Bearer ${SENTINEL}`, cookie: SENTINEL }, "x-api-key", REAL)
    expect(r.injected).toBe(true)
    expect(r.headers).toEqual({ "x-api-key": REAL, authorization: `Bearer ${SENTINEL}`, cookie: SENTINEL })
    const own = injectCredential({ "x-api-key": "the-box's-own-key" }, "x-api-key", REAL)
    expect(own.injected).toBe(false)
    expect(own.headers["x-api-key"]).toBe("the-box's-own-key")
  })

  it("bearer: the Authorization scheme must be Bearer and the token a sentinel", () => {
    expect(injectCredential({ authorization: `Bearer ${sentinelJwt(0)}` }, "bearer", REAL).headers.authorization).toBe(`Bearer ${REAL}`)
    expect(injectCredential({ authorization: `Basic ${SENTINEL}` }, "bearer", REAL).injected).toBe(false)
    expect(injectCredential({ "x-api-key": SENTINEL }, "bearer", REAL).injected).toBe(false)
  })

  it("basic: the sentinel as password (or user) is swapped inside the encoding, and the encoded form is scrubbed too", () => {
    const r = injectCredential({ authorization: `Basic ${Buffer.from(`git:${SENTINEL}`).toString("base64")}` }, "basic", REAL)
    const encoded = Buffer.from(`git:${REAL}`).toString("base64")
    expect(r.headers.authorization).toBe(`Basic ${encoded}`)
    expect(r.reveals).toEqual([REAL, encoded])
  })
})

const scrubbed = (chunks: ReadonlyArray<string>, secrets: ReadonlyArray<string>) =>
  new Promise<string>((resolve) => {
    let out = ""
    Readable.from(chunks.map((c) => Buffer.from(c))).pipe(new Scrub(secrets, Buffer.from("[S]")))
      .on("data", (c: Buffer) => (out += c.toString()))
      .on("end", () => resolve(out))
  })

describe("scrubbing answers", () => {
  it("removes a secret however the stream is cut (property)", async () => {
    await fc.assert(fc.asyncProperty(
      fc.array(fc.constantFrom("a", "b", REAL, "sk-", "REAL", "\n\n"), { maxLength: 30 }),
      fc.array(fc.integer({ min: 1, max: 7 }), { minLength: 1, maxLength: 40 }),
      async (parts, cuts) => {
        const text = parts.join("")
        const chunks: Array<string> = []
        let i = 0
        for (let k = 0; i < text.length; k++) {
          const n = cuts[k % cuts.length] ?? 1
          chunks.push(text.slice(i, i + n))
          i += n
        }
        const out = await scrubbed(chunks, [REAL])
        expect(out).toBe(text.split(REAL).join("[S]"))
      }
    ), { numRuns: 200 })
  })

  it("holds nothing back when no secret could be starting: each event flows at once", async () => {
    const s = new Scrub([REAL], Buffer.from("[S]"))
    const seen: Array<string> = []
    s.on("data", (c: Buffer) => seen.push(c.toString()))
    s.write("event: a\ndata: 1\n\n")
    await new Promise((r) => setImmediate(r))
    expect(seen.join("")).toBe("event: a\ndata: 1\n\n")
    s.write("data: sk-an")
    await new Promise((r) => setImmediate(r))
    expect(seen.join("")).toBe("event: a\ndata: 1\n\ndata: ")
  })
})

describe("a hostile echo: the secret reflected in every form roster scrubs", () => {
  const encodings: Record<string, { readonly encode: (s: string, pad: Buffer) => string; readonly decode: (t: string) => string }> = {
    raw: { encode: (s) => s, decode: (t) => t },
    "json \\u": { encode: (s) => JSON.stringify(s).slice(1, -1).replace(/./g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`), decode: (t) => t.replace(/\\u([0-9a-fA-F]{4})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16))) },
    "percent, every byte": { encode: (s) => [...Buffer.from(s)].map((b) => `%${b.toString(16).toUpperCase().padStart(2, "0")}`).join(""), decode: (t) => { try { return decodeURIComponent(t) } catch { return t } } },
    "percent, a component": { encode: (s) => encodeURIComponent(s), decode: (t) => { try { return decodeURIComponent(t) } catch { return t } } },
    base64: { encode: (s, pad) => Buffer.concat([pad, Buffer.from(s), pad]).toString("base64"), decode: (t) => Buffer.from(t, "base64").toString("latin1") },
    "base64url": { encode: (s, pad) => Buffer.concat([pad, Buffer.from(s)]).toString("base64url"), decode: (t) => Buffer.from(t, "base64url").toString("latin1") }
  }

  it("never lets an encoded secret through, whatever its alignment and however the stream is cut (property)", async () => {
    await fc.assert(fc.asyncProperty(
      fc.string({ minLength: 12, maxLength: 48, unit: fc.constantFrom(..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~+/=:")}),
      fc.constantFrom(...Object.keys(encodings)),
      fc.uint8Array({ maxLength: 5 }),
      fc.array(fc.integer({ min: 1, max: 9 }), { minLength: 1, maxLength: 20 }),
      async (secret, which, pad, cuts) => {
        const enc = encodings[which]!
        const body = `data: {"echo":"${enc.encode(secret, Buffer.from(pad))}"}\n\n`
        const chunks: Array<string> = []
        for (let i = 0, k = 0; i < body.length; k++) {
          const n = cuts[k % cuts.length] ?? 1
          chunks.push(body.slice(i, i + n))
          i += n
        }
        const out = await scrubbed(chunks, [secret])
        const payload = /"echo":"(.*)"/.exec(out)?.[1] ?? out
        expect(enc.decode(payload)).not.toContain(secret)
        expect(out).not.toContain(secret)
      }
    ), { numRuns: 400 })
  })

  it("scrubs header values in every form too", () => {
    const secret = "sk-ant-api03-REAL-header-secret"
    for (const enc of Object.values(encodings)) {
      expect(enc.decode(scrubText(`x ${enc.encode(secret, Buffer.alloc(1))} y`, [secret], "[S]"))).not.toContain(secret)
    }
  })
})

describe("a partial encoding: each character of the secret plain, %hh or \\uhhhh, in any case and any mix", () => {
  const hex = (n: number, width: number, upper: boolean) => {
    const h = n.toString(16).padStart(width, "0")
    return upper ? h.toUpperCase() : h
  }
  /** The secret with character i spelled as `forms[i]` (0 plain, 1 %hh, 2 \uhhhh), hex case by `cases[i]`. */
  const spell = (secret: string, forms: ReadonlyArray<number>, cases: ReadonlyArray<boolean>) =>
    [...secret].map((c, i) => {
      const form = forms[i % forms.length] ?? 0
      const upper = cases[i % cases.length] ?? false
      if (form === 1) return [...Buffer.from(c)].map((b) => `%${hex(b, 2, upper)}`).join("")
      if (form === 2) return `\\u${hex(c.charCodeAt(0), 4, upper)}`
      return c
    }).join("")
  const cutInto = (text: string, cuts: ReadonlyArray<number>) => {
    const chunks: Array<string> = []
    for (let i = 0, k = 0; i < text.length; k++) {
      const n = cuts[k % cuts.length] ?? 1
      chunks.push(text.slice(i, i + n))
      i += n
    }
    return chunks
  }
  const decodeAll = (t: string) => {
    const unicode = t.replace(/\\u([0-9a-fA-F]{4})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)))
    try {
      return decodeURIComponent(unicode)
    } catch {
      return unicode
    }
  }

  it("is never let through, whatever the mix and however the stream is cut (property)", async () => {
    await fc.assert(fc.asyncProperty(
      fc.string({ minLength: 12, maxLength: 40, unit: fc.constantFrom(..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~") }),
      fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 1, maxLength: 40 }),
      fc.array(fc.boolean(), { minLength: 1, maxLength: 40 }),
      fc.array(fc.integer({ min: 1, max: 11 }), { minLength: 1, maxLength: 20 }),
      fc.constantFrom("", "%", "\\", "%2", "\\u00", "x"),
      async (secret, forms, cases, cuts, before) => {
        const spelled = spell(secret, forms, cases)
        const body = `data: {"echo":"${before}${spelled}","n":1}\n\n`
        const out = await scrubbed(cutInto(body, cuts), [secret])
        expect(decodeAll(out)).not.toContain(secret)
        // Nothing else is touched — but a backslash just before a \\u spelling is that escape's own, escaped again.
        const kept = `data: {"echo":"${before}[S]","n":1}\n\n`
        expect(before === "\\" && spelled.startsWith("\\u") ? [kept, `data: {"echo":"[S]","n":1}\n\n`] : [kept]).toContain(out)
      }
    ), { numRuns: 600 })
  })

  it("the forms the attack used: sk%2Dant%2D…, mixed case %2d, sk\\u002dant…", async () => {
    const secret = "sk-ant-api03-REALsecretVALUE-0123"
    for (const reflected of [
      "sk%2Dant%2Dapi03%2DREALsecretVALUE%2D0123",
      "sk%2dant%2Dapi03-REALsecretVALUE%2d0123",
      "sk\\u002dant\\u002Dapi03\\u002dREALsecretVALUE-0123",
      "%73k-ant-api03-REAL%73ecretVALUE-0123",
      "sk-ant-api03-REALsecretVALUE-0123"
    ]) {
      expect(await scrubbed(cutInto(`{"e":"${reflected}"}`, [3, 5, 2]), [secret])).toBe(`{"e":"[S]"}`)
      expect(scrubText(`x ${reflected} y`, [secret], "[S]")).toBe("x [S] y")
    }
  })

  it("leaves text that only starts like the secret alone, and flows when nothing could be starting", async () => {
    const secret = "sk-ant-api03-REALsecretVALUE-0123"
    expect(await scrubbed(["sk-ant-api03-REAL", "secret but not the rest\n"], [secret])).toBe("sk-ant-api03-REALsecret but not the rest\n")
    expect(await scrubbed(["100% of \\n escapes\\", "u0041 and %41\n"], [secret])).toBe("100% of \\n escapes\\u0041 and %41\n")
  })
})
