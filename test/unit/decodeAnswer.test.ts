import { describe, expect, it } from "@effect/vitest"
import type { Transform } from "node:stream"
import * as zlib from "node:zlib"
import { answerDecoding } from "../../src/gateway/metering/decodeAnswer.js"

const encoders: Record<string, (b: Buffer) => Buffer> = {
  gzip: (b) => zlib.gzipSync(b),
  br: (b) => zlib.brotliCompressSync(b),
  deflate: (b) => zlib.deflateSync(b),
  zstd: (b) => zlib.zstdCompressSync(b)
}

/** What the chain of decoders gives for `input`, read to its end. */
const decodeAll = (decoders: ReadonlyArray<Transform>, input: Buffer) =>
  new Promise<Buffer>((resolve, reject) => {
    const chunks: Array<Buffer> = []
    const last = decoders.slice(1).reduce((prev, d) => prev.pipe(d), decoders[0]!)
    last.on("data", (c: Buffer) => chunks.push(c))
    last.on("end", () => resolve(Buffer.concat(chunks)))
    for (const d of decoders) d.on("error", reject)
    decoders[0]!.end(input)
  })

describe("an answer's content-encoding undone so it can be scrubbed (gzip, deflate, br, zstd)", () => {
  it("each coding, and two stacked, come back as they were; an unknown one is refused, never passed", async () => {
    const text = Buffer.from(`{"echoed":"sk-ant-api03-REAL-${"x".repeat(2000)}"}`)
    for (const coding of Object.keys(encoders)) {
      const d = answerDecoding(coding)
      expect(d.ok, coding).toBe(true)
      if (d.ok) expect((await decodeAll(d.decoders, encoders[coding]!(text))).equals(text), coding).toBe(true)
    }
    const stacked = answerDecoding("gzip, zstd")
    if (!stacked.ok) throw new Error("gzip, zstd refused")
    expect((await decodeAll(stacked.decoders, zlib.zstdCompressSync(zlib.gzipSync(text)))).equals(text)).toBe(true)
    expect(answerDecoding("compress")).toEqual({ ok: false, coding: "compress" })
    expect(answerDecoding("zstd, x-custom")).toEqual({ ok: false, coding: "x-custom" })
  })

  it("a bomb (64 MiB of zeros in a few KiB) never decodes ahead of its reader: what waits unread stays bounded, the same for every coding", async () => {
    const bomb = Buffer.alloc(64 * 1024 * 1024)
    for (const coding of ["gzip", "br", "zstd"]) {
      const d = answerDecoding(coding)
      if (!d.ok) throw new Error(`${coding} refused`)
      const [decoder] = d.decoders
      const small = encoders[coding]!(bomb)
      expect(small.length, coding).toBeLessThan(3 * 1024 * 1024)
      decoder!.write(small)
      // Nobody reads: the decoder stops once its buffer is full, whatever the compressed bytes would give.
      await new Promise((r) => setTimeout(r, 200))
      expect(decoder!.readableLength, coding).toBeLessThanOrEqual(1024 * 1024)
      // Read, it gives all of it.
      let total = 0
      decoder!.on("data", (c: Buffer) => (total += c.length))
      await new Promise<void>((resolve) => {
        decoder!.on("end", () => resolve())
        decoder!.end()
      })
      expect(total, coding).toBe(bomb.length)
    }
  })
})
