import { FileSystem } from "@effect/platform"
import { Effect, Option, Stream } from "effect"

/**
 * Box output to a file, each chunk to `onChunk` and its complete lines to `onLine` as they arrive. If the file can't
 * be opened the output is still drained: dropping the pipe would kill the box with EPIPE
 * mid-run and report a failure nobody could explain.
 */
export const drainTo = (
  output: Stream.Stream<Uint8Array, unknown>,
  file: string,
  watch: {
    readonly onLine?: ((line: string) => Effect.Effect<void>) | undefined
    readonly onChunk?: ((chunk: Uint8Array) => Effect.Effect<void>) | undefined
    /** Append after the file's first `skip` bytes, dropping that many from the output (a replay of what is already there). */
    readonly skip?: number | undefined
  } = {}
) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const handle = yield* fs.open(file, { flag: watch.skip === undefined ? "w" : "a" }).pipe(
      Effect.tapError((e) => Effect.logWarning(`could not open ${file} (${e.message}); that output will be missing`)),
      Effect.option
    )
    const { onChunk, onLine } = watch
    const decoder = new TextDecoder()
    let partial = ""
    const lines = (chunk: Uint8Array) => {
      if (!onLine) return Effect.void
      partial += decoder.decode(chunk, { stream: true })
      const complete = partial.split("\n")
      partial = complete.pop() ?? ""
      return Effect.forEach(complete, onLine, { discard: true })
    }
    yield* Stream.runForEach(watch.skip ? skipBytes(output, watch.skip) : output, (chunk) =>
      Option.match(handle, { onNone: () => Effect.void, onSome: (h) => h.writeAll(chunk).pipe(Effect.ignore) }).pipe(
        Effect.zipRight(onChunk ? onChunk(chunk) : Effect.void),
        Effect.zipRight(lines(chunk))
      ))
    if (onLine && partial !== "") yield* onLine(partial)
  }).pipe(Effect.scoped, Effect.ignore)

/** The stream without its first `n` bytes. */
const skipBytes = <E>(output: Stream.Stream<Uint8Array, E>, n: number) =>
  output.pipe(
    Stream.mapAccum(n, (left, chunk): readonly [number, Uint8Array] =>
      left <= 0 ? [0, chunk] : left >= chunk.length ? [left - chunk.length, new Uint8Array(0)] : [0, chunk.subarray(left)]),
    Stream.filter((chunk) => chunk.length > 0)
  )
