import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Duplex, PassThrough } from "node:stream"
import * as crypto from "node:crypto"
import { SENTINEL } from "../../src/contract/constants.js"
import { encodeFrame, type FrameEvent, FrameReader, OP } from "../../src/gateway/inject/wsFrames.js"
import { HALF_OPEN_MS, relayWebSocket } from "../../src/gateway/inject/wsRelay.js"

/** A client frame: masked with a random key, as RFC 6455 requires of a client. */
const masked = (fin: boolean, opcode: number, payload: Buffer) => {
  const plain = encodeFrame(fin, opcode, payload)
  const headLength = plain.length - payload.length
  const mask = crypto.randomBytes(4)
  const head = Buffer.from(plain.subarray(0, headLength))
  head[1] = (head[1] as number) | 0x80
  return Buffer.concat([head, mask, Buffer.from(payload.map((b, i) => b ^ (mask[i & 3] as number)))])
}

/** The frames a reader finds, each as [fin, opcode, payload]. */
const read = (chunks: ReadonlyArray<Buffer>) => {
  const reader = new FrameReader()
  const frames: Array<[boolean, number, string]> = []
  let current: { fin: boolean; opcode: number; parts: Array<Buffer> } | undefined
  const on = (e: FrameEvent) => {
    if (e._tag === "Header") current = { fin: e.header.fin, opcode: e.header.opcode, parts: [] }
    else if (e._tag === "Payload") current?.parts.push(e.bytes)
    else if (current) frames.push([current.fin, current.opcode, Buffer.concat(current.parts).toString()])
  }
  for (const c of chunks) expect(reader.push(c, on)).toBe(true)
  return frames
}

describe("WebSocket frames", () => {
  it("are read the same in any chunking: masked or not, short, 16-bit and 64-bit lengths, empty", () => {
    const long = "x".repeat(70_000)
    const wire = Buffer.concat([
      masked(true, OP.text, Buffer.from("hi")), encodeFrame(false, OP.binary, Buffer.from("a".repeat(300))),
      encodeFrame(true, OP.continuation, Buffer.alloc(0)), masked(true, OP.text, Buffer.from(long)), encodeFrame(true, OP.ping, Buffer.from("p"))
    ])
    const expected: Array<[boolean, number, string]> = [[true, OP.text, "hi"], [false, OP.binary, "a".repeat(300)], [true, OP.continuation, ""], [true, OP.text, long], [true, OP.ping, "p"]]
    expect(read([wire])).toEqual(expected)
    expect(read([...wire].map((b) => Buffer.from([b])))).toEqual(expected)
    expect(read([wire.subarray(0, 3), wire.subarray(3, 305), wire.subarray(305)])).toEqual(expected)
  })

  /** One end of a connection: what it reads is written to `incoming`, what it writes comes out of `outgoing`. */
  const end = () => {
    const incoming = new PassThrough()
    const outgoing = new PassThrough()
    return { side: Duplex.from({ readable: incoming, writable: outgoing }), incoming, outgoing }
  }

  const relayed = (upstreamBytes: Buffer) =>
    Effect.gen(function*() {
      const { outgoing: toBox, side: box } = end()
      const { incoming: fromUpstream, side: upstream } = end()
      const heard: Array<Buffer> = []
      toBox.on("data", (c: Buffer) => heard.push(c))
      const fiber = yield* Effect.fork(relayWebSocket(box, upstream, Buffer.alloc(0), Buffer.alloc(0), {
        secrets: ["sk-REAL-0123456789"], maxFrame: 1024, onSentinel: (done) => done(true)
      }))
      fromUpstream.write(upstreamBytes)
      yield* Effect.sleep("300 millis")
      upstream.destroy()
      const result = yield* fiber.await
      return { frames: read(heard), result }
    })

  it.live("the upstream's frames reach the box scrubbed, a key split over fragments too; control frames are scrubbed alone", () =>
    Effect.gen(function*() {
      const { frames } = yield* relayed(Buffer.concat([
        encodeFrame(false, OP.text, Buffer.from("key: sk-REAL-01")), encodeFrame(true, OP.continuation, Buffer.from("23456789 end")),
        encodeFrame(true, OP.ping, Buffer.from("sk-REAL-0123456789"))
      ]))
      const text = frames.filter(([, op]) => op !== OP.ping).map(([, , p]) => p).join("")
      expect(text).toBe(`key: ${SENTINEL} end`)
      expect(frames.at(-1)).toEqual([true, OP.ping, SENTINEL])
      expect(JSON.stringify(frames)).not.toContain("REAL")
    }))

  /** The messages the box got, each its fragments joined (control frames left out). */
  const messages = (frames: ReadonlyArray<[boolean, number, string]>) => {
    const out: Array<string> = []
    let current = ""
    for (const [fin, op, payload] of frames) {
      if (op >= 8) continue
      current += payload
      if (fin) {
        out.push(current)
        current = ""
      }
    }
    return out
  }

  it.live("a key split over two messages that come together is scrubbed too; a message whose end could begin one still arrives whole", () =>
    Effect.gen(function*() {
      const { frames } = yield* relayed(Buffer.concat([
        encodeFrame(true, OP.text, Buffer.from("first sk-REAL-01")), encodeFrame(true, OP.text, Buffer.from("23456789 second")),
        encodeFrame(true, OP.text, Buffer.from("items"))
      ]))
      expect(JSON.stringify(frames)).not.toContain("REAL")
      const got = messages(frames)
      expect(got.join("")).toBe(`first ${SENTINEL} second` + "items")
      // "items" ends in a letter a key begins with: held for the next message, then sent alone when none came.
      expect(got.at(-1)).toBe("items")
      expect(got).toHaveLength(3)
    }))

  it.live("a box's frame with the sentinel reaches the upstream only once its taint is written, and what follows stays behind it", () =>
    Effect.gen(function*() {
      const { incoming: fromBox, side: box } = end()
      const { outgoing: toUpstream, side: upstream } = end()
      const got: Array<Buffer> = []
      toUpstream.on("data", (c: Buffer) => got.push(c))
      let release: (ok: boolean) => void = () => {}
      const fiber = yield* Effect.fork(relayWebSocket(box, upstream, Buffer.alloc(0), Buffer.alloc(0), {
        secrets: [], maxFrame: 1024, onSentinel: (done) => (release = done)
      }))
      fromBox.write(masked(true, OP.text, Buffer.from(`k=${SENTINEL}`)))
      fromBox.write(masked(true, OP.text, Buffer.from("after")))
      yield* Effect.sleep("50 millis")
      expect(got).toEqual([])
      release(true)
      yield* Effect.sleep("50 millis")
      expect(read(got).map(([, , p]) => p)).toEqual([`k=${SENTINEL}`, "after"])
      upstream.destroy()
      yield* fiber.await
    }))

  it.live("a box's frame with the sentinel whose taint cannot be recorded never reaches the upstream: the connection is cut, saying why", () =>
    Effect.gen(function*() {
      const { incoming: fromBox, side: box } = end()
      const { outgoing: toUpstream, side: upstream } = end()
      const got: Array<Buffer> = []
      toUpstream.on("data", (c: Buffer) => got.push(c))
      const fiber = yield* Effect.fork(relayWebSocket(box, upstream, Buffer.alloc(0), Buffer.alloc(0), {
        secrets: [], maxFrame: 1024, onSentinel: (done) => setTimeout(() => done(false), 20)
      }))
      fromBox.write(masked(true, OP.text, Buffer.from(`k=${SENTINEL}`)))
      fromBox.write(masked(true, OP.text, Buffer.from("after")))
      const result = yield* fiber.await
      expect(got).toEqual([])
      expect(result._tag === "Success" && result.value.note).toMatch(/taint could not be recorded/)
    }))

  it.live("a compressed frame (RSV1) or one over the size limit is never passed on: the box gets a close frame saying why", () =>
    Effect.gen(function*() {
      const deflated = encodeFrame(true, OP.text, Buffer.from("sk-REAL-0123456789"))
      deflated[0] = (deflated[0] as number) | 0x40
      const cut = yield* relayed(deflated)
      expect(cut.frames).toHaveLength(1)
      expect(cut.frames[0]?.[1]).toBe(OP.close)
      expect(cut.frames[0]?.[2]).toContain("compressed or extended frame")
      const big = yield* relayed(encodeFrame(true, OP.binary, Buffer.alloc(2048)))
      expect(big.frames[0]?.[2]).toContain("a frame over 1024 bytes")
    }))

  it.live("the real key split over two messages 400 ms apart never reaches the box in two pieces it can join (a few bytes of its head, or many)", () =>
    Effect.gen(function*() {
      const secret = "sk-REAL-0123456789"
      for (const head of ["sk-", "sk-REAL-012"]) {
        const { outgoing: toBox, side: box } = end()
        const { incoming: fromUpstream, side: upstream } = end()
        const heard: Array<Buffer> = []
        toBox.on("data", (c: Buffer) => heard.push(c))
        const fiber = yield* Effect.fork(relayWebSocket(box, upstream, Buffer.alloc(0), Buffer.alloc(0), {
          secrets: [secret], maxFrame: 1024, onSentinel: (done) => done(true)
        }))
        fromUpstream.write(encodeFrame(true, OP.text, Buffer.from(`first ${head}`)))
        yield* Effect.sleep("400 millis")
        const before = messages(read(heard))
        fromUpstream.write(encodeFrame(true, OP.text, Buffer.from(`${secret.slice(head.length)} second`)))
        yield* Effect.sleep("200 millis")
        upstream.destroy()
        yield* fiber.await
        const got = messages(read(heard))
        const all = Buffer.concat(heard).toString("latin1")
        expect(all, head).not.toContain(secret)
        expect(got.join(""), head).not.toContain(secret)
        expect(got.join(""), head).not.toContain("3456789")
        expect(got, head).toHaveLength(2)
        expect(got[1], head).toBe(`${SENTINEL} second`)
        // A few bytes of a head wait a moment only: the first message was there whole before the second came;
        // a long one waits for the next message, and then goes as nothing of the key.
        expect(before, head).toEqual(head === "sk-" ? ["first sk-"] : [])
        expect(got[0], head).toBe(head === "sk-" ? "first sk-" : "first ")
      }
    }))

  it.live("a box that ends its side while the upstream keeps its own: both are closed within the bound, and the relay ends", () =>
    Effect.gen(function*() {
      const { incoming: fromBox, side: box } = end()
      const { side: upstream } = end()
      const fiber = yield* Effect.fork(relayWebSocket(box, upstream, Buffer.alloc(0), Buffer.alloc(0), {
        secrets: [], maxFrame: 1024, onSentinel: (done) => done(true)
      }))
      fromBox.write(masked(true, OP.close, Buffer.from([0x03, 0xe8])))
      fromBox.end()
      const started = Date.now()
      while (Date.now() - started < HALF_OPEN_MS + 2000 && (yield* fiber.poll)._tag === "None") yield* Effect.sleep("50 millis")
      expect((yield* fiber.poll)._tag, "the relay ended").toBe("Some")
      expect(upstream.destroyed).toBe(true)
      expect(box.destroyed).toBe(true)
    }))

  /** What the upstream hears of the box's bytes, written in `chunks`, and how the relay ended. */
  const fromTheBox = (chunks: ReadonlyArray<Buffer>) =>
    Effect.gen(function*() {
      const { incoming: boxWrites, side: box } = end()
      const { outgoing: toUpstream, side: upstream } = end()
      const heard: Array<Buffer> = []
      toUpstream.on("data", (c: Buffer) => heard.push(c))
      const fiber = yield* Effect.fork(relayWebSocket(box, upstream, Buffer.alloc(0), Buffer.alloc(0), {
        secrets: ["sk-REAL-0123456789"], maxFrame: 1024, onSentinel: (done) => done(true)
      }))
      for (const c of chunks) {
        boxWrites.write(c)
        yield* Effect.sleep("20 millis")
      }
      yield* Effect.sleep("100 millis")
      upstream.destroy()
      const result = yield* fiber.await
      return { heard: Buffer.concat(heard), result }
    })

  it.live("the box's frames go on byte for byte, in any chunking, fragmented messages and control frames among them", () =>
    Effect.gen(function*() {
      const wire = Buffer.concat([
        masked(false, OP.text, Buffer.from("hel")), masked(true, OP.ping, Buffer.from("p")), masked(true, OP.continuation, Buffer.from("lo")),
        masked(true, OP.binary, Buffer.alloc(70_000, 7)), masked(true, OP.close, Buffer.from([0x03, 0xe8]))
      ])
      const chunks = [wire.subarray(0, 1), wire.subarray(1, 7), wire.subarray(7, 5000), wire.subarray(5000)]
      const { heard, result } = yield* fromTheBox(chunks)
      expect(heard.equals(wire)).toBe(true)
      expect(result._tag === "Success" && result.value.note).toBeFalsy()
    }))

  it.live.each<[string, Buffer, RegExp]>([
    ["a plain HTTP request written after the upgrade", Buffer.from("GET /admin HTTP/1.1\r\nHost: api.example.com\r\n\r\n"), /not a frame/],
    ["an unmasked frame", encodeFrame(true, OP.text, Buffer.from("hi")), /unmasked frame/],
    ["a frame with an RSV bit (a compressed one)", Buffer.from([0xc1, 0x80, 1, 2, 3, 4]), /RSV bits/],
    ["an unknown opcode", Buffer.from([0x83, 0x80, 1, 2, 3, 4]), /opcode 3/],
    ["a continuation outside a message", masked(true, OP.continuation, Buffer.from("x")), /out of order/],
    ["a ping of 126 bytes", masked(true, OP.ping, Buffer.alloc(126)), /control frame/]
  ])("%s after a good frame: the good frame goes on, the rest never reaches the upstream and the connection is cut", ([, bad, why]) =>
    Effect.gen(function*() {
      const good = masked(true, OP.text, Buffer.from("ok"))
      const { heard, result } = yield* fromTheBox([good, bad, masked(true, OP.text, Buffer.from("after"))])
      expect(heard.equals(good)).toBe(true)
      expect(result._tag === "Success" && result.value.note).toMatch(why)
    }))
})
