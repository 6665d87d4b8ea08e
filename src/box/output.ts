import { FileSystem } from "@effect/platform"
import { Effect, Option, Stream } from "effect"
import { type BoxPolicy, parseSize } from "../config/schema.js"
import { LINE_MAX, makeLineCutter } from "../fs/lines.js"

/** A box's output caps from `[box] transcript_max` and `line_max`. */
export const outputCaps = (box: Pick<BoxPolicy, "transcript_max" | "line_max">) => ({
  maxBytes: parseSize(box.transcript_max),
  maxLine: parseSize(box.line_max)
})

/** The last line of a transcript cut at `[box] transcript_max`: the run went on, its file did not. */
export const transcriptCutLine = (max: number) => `${JSON.stringify({ type: "roster_transcript_cut", max_bytes: max })}\n`

/** The last line of a transcript cut short by a failure: a write refused (a full disk), or the box's output stream broken. */
export const transcriptFailedLine = (reason: "write_failed" | "output_broken", detail: string) =>
  `\n${JSON.stringify({ type: "roster_transcript_cut", reason, detail })}\n`

export interface DrainOptions {
  readonly onLine?: ((line: string) => Effect.Effect<void>) | undefined
  readonly onChunk?: ((chunk: Uint8Array) => Effect.Effect<void>) | undefined
  /** Append after the file's first `skip` bytes, dropping that many from the output (a replay of what is already there). */
  readonly skip?: number | undefined
  /** The file's cap in bytes (`[box] transcript_max`); past it the output is still drained, not written. */
  readonly maxBytes?: number | undefined
  /** The longest line handed to `onLine` (longer ones are cut with a visible mark). */
  readonly maxLine?: number | undefined
  /** Which lines `onLine` wants at all (checked synchronously, so skipped lines cost no effect run). */
  readonly wanted?: ((line: string) => boolean) | undefined
}

/**
 * Box output to a file, each chunk to `onChunk` and its lines (each cut at `maxLine`) to
 * `onLine` as they arrive; the file stops at `maxBytes` with a marker line. Memory stays
 * bounded whatever the box prints. If the file can't be opened the output is still drained:
 * dropping the pipe would kill the box with EPIPE mid-run and report a failure nobody could explain.
 */
export const drainTo = (output: Stream.Stream<Uint8Array, unknown>, file: string, watch: DrainOptions = {}) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const handle = yield* fs.open(file, { flag: watch.skip === undefined ? "w" : "a" }).pipe(
      Effect.tapError((e) => Effect.logWarning(`could not open ${file} (${e.message}); that output will be missing`)),
      Effect.option
    )
    const { onChunk, onLine } = watch
    const cutter = makeLineCutter(watch.maxLine ?? LINE_MAX)
    const { wanted } = watch
    const kept = (lines: Array<string>) => (wanted ? lines.filter(wanted) : lines)
    const max = watch.maxBytes ?? Number.POSITIVE_INFINITY
    let written = watch.skip ?? 0
    // A write refused once (a full disk, a removed folder) stops the file, said once, with a last line that says why:
    // the box's output is still drained, so the box runs on.
    let failed = false
    const stop = (h: FileSystem.File, why: string, reason: "write_failed" | "output_broken") =>
      Effect.logWarning(`${file}: ${why}; the rest of this output is not kept`).pipe(
        // The file already refused a write: its last line may not land either, and the warning just before says why.
        Effect.zipRight(h.writeAll(new TextEncoder().encode(transcriptFailedLine(reason, why))).pipe(Effect.ignore))
      )
    const write = (chunk: Uint8Array) =>
      Option.match(handle, {
        onNone: () => Effect.void,
        onSome: (h) => {
          if (written >= max || failed) return Effect.void
          const room = max - written
          const part = chunk.length <= room ? chunk : chunk.subarray(0, room)
          written += part.length
          const full = written >= max
          return h.writeAll(part).pipe(
            Effect.zipRight(full ? h.writeAll(new TextEncoder().encode(`\n${transcriptCutLine(max)}`)) : Effect.void),
            Effect.catchAll((e) => {
              failed = true
              return stop(h, `it could not be written (${e.message})`, "write_failed")
            })
          )
        }
      })
    const drained = yield* Stream.runForEach(watch.skip ? skipBytes(output, watch.skip) : output, (chunk) =>
      write(chunk).pipe(
        Effect.zipRight(onChunk ? onChunk(chunk) : Effect.void),
        Effect.zipRight(onLine ? Effect.forEach(kept(cutter.push(chunk)), onLine, { discard: true }) : Effect.void)
      )).pipe(Effect.either)
    // The engine's stream broke before the box's output ended: what the box said after is lost, and the file says so.
    if (drained._tag === "Left") {
      const why = `the box's output stream broke (${drained.left instanceof Error ? drained.left.message : String(drained.left)})`
      yield* Option.match(handle, { onNone: () => Effect.logWarning(`${file}: ${why}`), onSome: (h) => (failed ? Effect.void : stop(h, why, "output_broken")) })
    }
    if (onLine) yield* Effect.forEach(kept(cutter.end()), onLine, { discard: true })
  }).pipe(Effect.scoped)

/** The stream without its first `n` bytes. */
const skipBytes = <E>(output: Stream.Stream<Uint8Array, E>, n: number) =>
  output.pipe(
    Stream.mapAccum(n, (left, chunk): readonly [number, Uint8Array] =>
      left <= 0 ? [0, chunk] : left >= chunk.length ? [left - chunk.length, new Uint8Array(0)] : [0, chunk.subarray(left)]),
    Stream.filter((chunk) => chunk.length > 0)
  )
