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
  } = {}
) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const handle = yield* fs.open(file, { flag: "w" }).pipe(
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
    yield* Stream.runForEach(output, (chunk) =>
      Option.match(handle, { onNone: () => Effect.void, onSome: (h) => h.writeAll(chunk).pipe(Effect.ignore) }).pipe(
        Effect.zipRight(onChunk ? onChunk(chunk) : Effect.void),
        Effect.zipRight(lines(chunk))
      ))
    if (onLine && partial !== "") yield* onLine(partial)
  }).pipe(Effect.scoped, Effect.ignore)
