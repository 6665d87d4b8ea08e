import { FileSystem, Path } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { Effect } from "effect"
import { isNotFound } from "./notFound.js"

/**
 * `write` of `file`, its folder made only when the write finds it missing: a file written on
 * every change (a journal line, a queue view) costs its write alone, not a `mkdir` each time.
 */
export const orMakeParent = <A, R>(file: string, write: Effect.Effect<A, PlatformError, R>) =>
  Effect.flatMap(Effect.zip(FileSystem.FileSystem, Path.Path), ([fs, path]) => orMakeParentIn(fs, path)(file, write))

/** {@link orMakeParent} through file services taken once (a store's, when its layer is built). */
export const orMakeParentIn = (fs: FileSystem.FileSystem, path: Path.Path) =>
<A, R>(file: string, write: Effect.Effect<A, PlatformError, R>) =>
  write.pipe(Effect.catchIf(isNotFound, () => Effect.zipRight(fs.makeDirectory(path.dirname(file), { recursive: true }), write)))
