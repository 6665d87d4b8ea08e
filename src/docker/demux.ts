import type { PassThrough, Readable } from "node:stream"

/**
 * The engine's multiplexed attach stream (8-byte frame headers: stream type, size) split into
 * stdout and stderr, with backpressure: while either reader is behind, the socket is paused, so
 * a box that floods its output is slowed to what roster writes instead of piling up in memory
 * (dockerode's demuxStream ignores a full reader).
 */
export const demux = (src: Readable, out: PassThrough, err: PassThrough) => {
  let pending: Buffer = Buffer.alloc(0)
  const resume = () => {
    if (!out.writableNeedDrain && !err.writableNeedDrain) src.resume()
  }
  src.on("data", (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk])
    let full = false
    while (pending.length >= 8) {
      const size = pending.readUInt32BE(4)
      if (pending.length < 8 + size) break
      const target = pending[0] === 2 ? err : out
      if (!target.write(pending.subarray(8, 8 + size))) full = true
      pending = pending.subarray(8 + size)
    }
    if (full) {
      src.pause()
      out.once("drain", resume)
      err.once("drain", resume)
    }
  })
}

