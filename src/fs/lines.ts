import { Effect, Stream } from "effect"
import { FileSystem } from "@effect/platform"

/** The default longest line roster holds in memory (the live view, a run's summary, the session loop). */
export const LINE_MAX = 1024 * 1024

/** What replaces the rest of a line longer than the cap, so a reader sees that it was cut. */
export const cutMark = (max: number) => ` …[roster: line cut at ${max} bytes]`

/**
 * Splits a byte stream into lines holding at most `max` bytes of any one line: the rest of a
 * longer line is dropped (the cut line ends with `cutMark`), so a box that prints a 50 MB line
 * costs a megabyte, not the line.
 */
export const makeLineCutter = (max: number = LINE_MAX) => {
  const decoder = new TextDecoder()
  let parts: Array<Uint8Array> = []
  let size = 0
  let cut = false
  const line = () => {
    const bytes = new Uint8Array(size)
    let at = 0
    for (const p of parts) {
      bytes.set(p, at)
      at += p.length
    }
    const text = decoder.decode(bytes)
    parts = []
    size = 0
    const wasCut = cut
    cut = false
    return wasCut ? `${text}${cutMark(max)}` : text
  }
  const keep = (bytes: Uint8Array) => {
    if (cut) return
    const room = max - size
    if (bytes.length > room) {
      if (room > 0) parts.push(bytes.subarray(0, room))
      size = max
      cut = true
      return
    }
    parts.push(bytes)
    size += bytes.length
  }
  return {
    push: (chunk: Uint8Array): Array<string> => {
      const out: Array<string> = []
      let from = 0
      for (let nl = chunk.indexOf(10, from); nl !== -1; nl = chunk.indexOf(10, from)) {
        keep(chunk.subarray(from, nl))
        out.push(line())
        from = nl + 1
      }
      // A chunk's bytes are copied only up to the cap: a buffer the engine reuses never aliases a held part.
      if (from < chunk.length) keep(chunk.slice(from, Math.min(chunk.length, from + Math.max(0, max - size) + 1)))
      return out
    },
    end: (): Array<string> => (size > 0 || cut ? [line()] : [])
  }
}

/** Folds a file's lines from byte `from` on (each cut at `max`) without ever holding the file or a long line whole. */
export const foldFileLines = <S>(file: string, initial: S, step: (s: S, line: string) => S, max: number = LINE_MAX, from: number = 0) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => foldLinesIn(fs)(file, initial, step, max, from))

/** {@link foldFileLines} through a file system taken once (a store's, when its layer is built): it needs nothing of its caller. */
export const foldLinesIn = (fs: FileSystem.FileSystem) =>
<S>(file: string, initial: S, step: (s: S, line: string) => S, max: number = LINE_MAX, from: number = 0) =>
  Effect.gen(function*() {
    const cutter = makeLineCutter(max)
    let state = initial
    yield* Stream.runForEach(fs.stream(file, { chunkSize: 64 * 1024, ...(from > 0 ? { offset: FileSystem.Size(from) } : {}) }), (chunk) =>
      Effect.sync(() => {
        for (const l of cutter.push(chunk)) state = step(state, l)
      }))
    for (const l of cutter.end()) state = step(state, l)
    return state
  })
