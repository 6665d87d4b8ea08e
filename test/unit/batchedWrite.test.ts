import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { batchedWrite } from "../../src/fs/batchedWrite.js"
import { Files } from "../../src/fs/Files.js"

/** A write that settles when the test says, recording what each call carried. */
const controlled = () => {
  const calls: Array<{ text: string; settle: (error?: Error) => void }> = []
  const write = (text: string) => new Promise<void>((resolve, reject) => calls.push({ text, settle: (e) => (e ? reject(e) : resolve()) }))
  return { calls, write }
}
const tick = () => new Promise((r) => setImmediate(r))

describe("batchedWrite", () => {
  it("writes the first line at once and the lines that came meanwhile as one write, in order; each caller hears of its own line", async () => {
    const { calls, write } = controlled()
    const lines = batchedWrite(write)
    const settled: Array<string> = []
    const one = lines.write("a\n").then(() => settled.push("a"))
    const rest = ["b\n", "c\n", "d\n"].map((l) => lines.write(l).then(() => settled.push(l.trim())))
    await tick()
    expect(calls.map((c) => c.text)).toEqual(["a\n"])
    calls[0]?.settle()
    await one
    await tick()
    expect(settled).toEqual(["a"])
    expect(calls.map((c) => c.text)).toEqual(["a\n", "b\nc\nd\n"])
    calls[1]?.settle()
    await Promise.all(rest)
    expect(settled).toEqual(["a", "b", "c", "d"])
    await lines.drained()
    expect(calls).toHaveLength(2)
  })

  it("a failed write fails the lines it carried, and the next lines are written", async () => {
    const { calls, write } = controlled()
    const lines = batchedWrite(write)
    const first = lines.write("a\n")
    const second = lines.write("b\n")
    await tick()
    calls[0]?.settle(new Error("disk full"))
    await expect(first).rejects.toThrow("disk full")
    await tick()
    calls[1]?.settle()
    await expect(second).resolves.toBeUndefined()
    const third = lines.write("c\n")
    await tick()
    expect(calls.map((c) => c.text)).toEqual(["a\n", "b\n", "c\n"])
    calls[2]?.settle()
    await third
  })

  it("drained waits for lines still in flight", async () => {
    const { calls, write } = controlled()
    const lines = batchedWrite(write)
    void lines.write("a\n")
    void lines.write("b\n")
    let drained = false
    const waiting = lines.drained().then(() => (drained = true))
    await tick()
    calls[0]?.settle()
    await tick()
    expect(drained).toBe(false)
    calls[1]?.settle()
    await waiting
    expect(drained).toBe(true)
  })
})

describe("Files.openAppend", () => {
  it("gives each line the byte offset it was written at, counted from the file's size when opened, multi-byte text included", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "roster-append-"))
    const file = path.join(dir, "log.jsonl")
    fs.writeFileSync(file, "already here\n")
    try {
      const lines = ["one\n", "twö — ✓\n", "three\n", "four\n"]
      const offsets = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
        const a = yield* Effect.acquireRelease((yield* Files).openAppend(file), (x) => x.close)
        // All at once: the last three join the batch while the first is in flight.
        return yield* Effect.all(lines.map((l) => a.write(l)), { concurrency: "unbounded" })
      })).pipe(Effect.provide(Files.layer)))
      const bytes = fs.readFileSync(file)
      expect(offsets[0]).toBe(Buffer.byteLength("already here\n"))
      lines.forEach((l, i) => expect(bytes.subarray(offsets[i], (offsets[i] ?? 0) + Buffer.byteLength(l)).toString()).toBe(l))
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
