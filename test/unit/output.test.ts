import { describe, expect, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
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
