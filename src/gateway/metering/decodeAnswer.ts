import { PassThrough, Transform, type TransformCallback } from "node:stream"
import * as zlib from "node:zlib"

/**
 * HTTP's "deflate" is meant to be zlib-wrapped, but servers send raw deflate too: the first
 * byte tells (a zlib header's low nibble is 8, the deflate method).
 */
class Inflate extends Transform {
  private inner: zlib.Inflate | zlib.InflateRaw | undefined

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback) {
    if (!this.inner) {
      if (chunk.length === 0) return done()
      this.inner = ((chunk[0] as number) & 0x0f) === 8 ? zlib.createInflate() : zlib.createInflateRaw()
      this.inner.on("data", (c: Buffer) => this.push(c))
      this.inner.once("error", (e) => this.destroy(e))
    }
    this.inner.write(chunk, done)
  }

  override _flush(done: TransformCallback) {
    if (!this.inner) return done()
    this.inner.once("end", () => done())
    this.inner.end()
  }
}

const decoderFor = (coding: string): Transform | undefined => {
  switch (coding) {
    case "gzip":
    case "x-gzip":
      // Flushed per chunk, so a compressed event stream still reaches the box event by event.
      return zlib.createGunzip({ flush: zlib.constants.Z_SYNC_FLUSH })
    case "deflate":
      return new Inflate()
    case "br":
      return zlib.createBrotliDecompress({ flush: zlib.constants.BROTLI_OPERATION_FLUSH })
    case "zstd":
      // Node >= 22.15 (roster's floor is 22.19); flushed per chunk, as gzip and br are, so a stream stays a stream.
      return zlib.createZstdDecompress({ flush: zlib.constants.ZSTD_e_flush })
    case "identity":
      return new PassThrough()
    default:
      return undefined
  }
}

export type AnswerDecoding =
  | { readonly ok: true; readonly decoders: ReadonlyArray<Transform> }
  | { readonly ok: false; readonly coding: string }

/**
 * How to undo an answer's `content-encoding` so its bytes can be scrubbed: the gateway asks for
 * identity, but an upstream may send gzip, deflate or br anyway, and a box that decompresses
 * would read a secret the scrubber never saw. Codings are undone last-applied first (gzip, deflate,
 * br, zstd); one roster cannot undo (anything unknown) is refused, never passed through.
 */
export const answerDecoding = (header: string | ReadonlyArray<string> | undefined): AnswerDecoding => {
  const codings = (Array.isArray(header) ? header.join(",") : String(header ?? ""))
    .split(",").map((c) => c.trim().toLowerCase()).filter((c) => c !== "")
  const decoders: Array<Transform> = []
  for (const coding of [...codings].reverse()) {
    const d = decoderFor(coding)
    if (!d) {
      for (const made of decoders) made.destroy()
      return { ok: false, coding }
    }
    decoders.push(d)
  }
  return { ok: true, decoders }
}
