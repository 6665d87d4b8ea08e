import { FileSystem, Path } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { Effect } from "effect"

const missing = (e: PlatformError) => e._tag === "SystemError" && e.reason === "NotFound"

/**
 * `write` of `file`, its folder made only when the write finds it missing: a file written on
 * every change (a journal line, a queue view) costs its write alone, not a `mkdir` each time.
 */
export const orMakeParent = <A, R>(file: string, write: Effect.Effect<A, PlatformError, R>) =>
  write.pipe(
    Effect.catchIf(missing, () =>
      Effect.gen(function*() {
        const path = yield* Path.Path
        yield* (yield* FileSystem.FileSystem).makeDirectory(path.dirname(file), { recursive: true })
        return yield* write
      }))
  )
