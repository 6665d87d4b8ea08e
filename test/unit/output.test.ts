import { describe, expect, it } from "@effect/vitest"
import { FileSystem } from "@effect/platform"
import { SystemError } from "@effect/platform/Error"
import { Effect, Layer, Stream } from "effect"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { drainTo, transcriptCutLine } from "../../src/box/output.js"
import { cutMark, foldFileLines, makeLineCutter } from "../../src/fs/lines.js"

const bytes = (s: string) => new TextEncoder().encode(s)

describe("bounded box output", () => {
  it("cuts a line over the cap with a visible mark, across chunks, and keeps the lines after it", () => {
    const cutter = makeLineCutter(10)
    const out = [
      ...cutter.push(bytes("abc\nlonglong")),
      ...cutter.push(bytes("longlong-and-more")),
      ...cutter.push(bytes("-tail\nnext\npartial")),
      ...cutter.end()
    ]
    expect(out).toEqual(["abc", `longlonglo${cutMark(10)}`, "next", "partial"])
  })

  it.effect("stops the transcript at its cap with a marker line, still hands every line on, cut", () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "roster-out-")), "stdout.jsonl")
    const seen: Array<string> = []
    const output = Stream.fromIterable([bytes("one\n"), bytes(`${"x".repeat(100)}\n`), bytes("three\n")])
    return Effect.gen(function*() {
      yield* drainTo(output, file, { maxBytes: 50, maxLine: 20, onLine: (l) => Effect.sync(() => void seen.push(l)) })
      const written = fs.readFileSync(file, "utf8")
      expect(written).toBe(`one\n${"x".repeat(46)}\n${transcriptCutLine(50)}`)
      expect(seen).toEqual(["one", `${"x".repeat(20)}${cutMark(20)}`, "three"])
      // A reader of the file meets the same cap.
      const lines = yield* foldFileLines(file, [] as Array<string>, (acc, l) => [...acc, l], 60)
      expect(lines.at(-1)).toContain("roster_transcript_cut")
    }).pipe(Effect.provide(NodeFileSystem.layer))
  })
})

describe("a box's output that cannot be kept is said, not dropped", () => {
  /** The real file system, whose handles refuse the `n`th write (once), as a full disk would. */
  const refusingWrite = (n: number) =>
    Layer.effect(FileSystem.FileSystem, Effect.gen(function*() {
      const real = yield* FileSystem.FileSystem
      let writes = 0
      return {
        ...real,
        open: (p: string, o?: FileSystem.OpenFileOptions) =>
          Effect.map(real.open(p, o), (h) => new Proxy(h, {
            get: (target, prop, receiver) =>
              prop === "writeAll"
                ? (b: Uint8Array) =>
                  ++writes === n
                    ? Effect.fail(new SystemError({ reason: "Unknown", module: "FileSystem", method: "writeAll", description: "no space left on device (test)" }))
                    : target.writeAll(b)
                : Reflect.get(target, prop, receiver)
          }))
      }
    })).pipe(Layer.provide(NodeFileSystem.layer))

  it.effect("a refused write ends the file with a line that says why, and every line still reaches its reader", () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "roster-out-")), "stdout.jsonl")
    const seen: Array<string> = []
    const output = Stream.fromIterable([bytes("one\n"), bytes("two\n"), bytes("three\n")])
    return Effect.gen(function*() {
      yield* drainTo(output, file, { onLine: (l) => Effect.sync(() => void seen.push(l)) })
      const written = fs.readFileSync(file, "utf8")
      expect(written.startsWith("one\n")).toBe(true)
      expect(written).not.toContain("three")
      expect(JSON.parse(written.trim().split("\n").at(-1)!)).toMatchObject({ type: "roster_transcript_cut", reason: "write_failed", detail: expect.stringContaining("no space left on device") })
      expect(seen).toEqual(["one", "two", "three"])
    }).pipe(Effect.provide(refusingWrite(2)))
  })

  it.effect("an output stream that breaks ends the file with a line that says so", () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "roster-out-")), "stdout.jsonl")
    const output = Stream.concat(Stream.fromIterable([bytes("one\n")]), Stream.fail(new Error("the engine's connection closed (test)")))
    return Effect.gen(function*() {
      yield* drainTo(output, file)
      const lines = fs.readFileSync(file, "utf8").trim().split("\n")
      expect(lines[0]).toBe("one")
      expect(JSON.parse(lines.at(-1)!)).toMatchObject({ type: "roster_transcript_cut", reason: "output_broken", detail: expect.stringContaining("the engine's connection closed") })
    }).pipe(Effect.provide(NodeFileSystem.layer))
  })
})
