import { describe, expect, it } from "vitest"
import { Readable } from "node:stream"
import { text } from "node:stream/consumers"
import { costOf, priceFor } from "../../src/config/prices.js"
import { type Verdict, UsageTap } from "../../src/gateway/metering/usageTap.js"

const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`
const ANSWER = [
  sse("message_start", { type: "message_start", message: { model: "m", usage: { input_tokens: 100, cache_read_input_tokens: 50, cache_creation_input_tokens: 10, output_tokens: 1 } } }),
  sse("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }),
  sse("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "x".repeat(400) } }),
  sse("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "é".repeat(40) } }),
  sse("message_delta", { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 130 } }),
  sse("message_stop", { type: "message_stop" })
].join("")

/** The answer through a tap in pieces of `size` bytes (cutting events and characters anywhere). */
const through = async (body: string, size: number, verdict: (n: { output: number }) => Verdict = () => "go") => {
  const bytes = Buffer.from(body)
  const pieces = Array.from({ length: Math.ceil(bytes.length / size) }, (_, i) => bytes.subarray(i * size, (i + 1) * size))
  const seen: Array<number> = []
  let stopped = 0
  const tap = new UsageTap("sse", {
    onProgress: (c) => (seen.push(c.output), verdict(c)),
    cutEvent: () => sse("error", { type: "error", error: { type: "billing_error", message: "out of budget" } }),
    onCut: () => void stopped++
  })
  const out = await text(Readable.from(pieces).pipe(tap))
  return { out, tap, seen, stopped }
}

describe("the usage tap", () => {
  it("passes an answer through unchanged, however it is cut into chunks, and reads its usage", async () => {
    for (const size of [1, 3, 7, 64, 100_000]) {
      const { out, tap } = await through(ANSWER, size)
      expect(out).toBe(ANSWER)
      expect(tap.count).toEqual({ input: 100, output: 130, cache_read: 50, cache_write: 10 })
    }
  })

  it("estimates output from the deltas until the answer says its count", async () => {
    const { seen } = await through(ANSWER, 64)
    // 400 characters ≈ 100 tokens, then 440 ≈ 110, then the real 130.
    expect(seen).toEqual([1, 1, 100, 110, 130, 130])
  })

  it("cuts at an event boundary: the events so far, a terminal error event, nothing after; the upstream stopped once", async () => {
    const { out, stopped, tap } = await through(ANSWER, 5, (c) => (c.output > 50 ? "cut" : "go"))
    expect(out.startsWith(ANSWER.slice(0, ANSWER.indexOf("event: content_block_delta")))).toBe(true)
    expect(out).toContain(`"text":"${"x".repeat(400)}"`)
    expect(out.endsWith(sse("error", { type: "error", error: { type: "billing_error", message: "out of budget" } }))).toBe(true)
    expect(out).not.toContain("é")
    expect(out).not.toContain("message_stop")
    expect(stopped).toBe(1)
    expect(tap.cut).toBe(true)
  })

  it("reads a JSON answer's usage at its end", async () => {
    const body = JSON.stringify({ type: "message", usage: { input_tokens: 7, output_tokens: 3 } })
    const tap = new UsageTap("json", { onProgress: () => "go", cutEvent: () => "", onCut: () => {} })
    expect(await text(Readable.from([Buffer.from(body.slice(0, 10)), Buffer.from(body.slice(10))]).pipe(tap))).toBe(body)
    expect(tap.count).toEqual({ input: 7, output: 3, cache_read: 0, cache_write: 0 })
  })

  it("prices by [[price]] first, then the shipped table, and an unknown model as the dearest", () => {
    const own = priceFor([{ model: "claude-sonnet-4-5*", input: 1, output: 2 }], "claude-sonnet-4-5-20250929")
    expect(own).toEqual({ known: true, price: { model: "claude-sonnet-4-5*", input: 1, output: 2 } })
    expect(costOf(own.price, { input: 1_000_000, output: 1_000_000, cache_read: 1_000_000, cache_write: 0 })).toBe(4)
    expect(priceFor([], "claude-opus-4-5-20251101").price.input).toBe(5)
    expect(priceFor([], "claude-opus-4-1").price.input).toBe(15)
    expect(priceFor([], "some-model")).toMatchObject({ known: false, price: { input: 15, output: 75 } })
  })
})
