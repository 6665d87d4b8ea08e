import type { FileSystem } from "@effect/platform"
import { Effect } from "effect"
import { isNotFound } from "./notFound.js"

/**
 * The names in a folder, for a caller that lists what it can: none when the folder does not exist
 * (nothing made there yet); one that exists and cannot be read is said — naming the folder and what
 * it holds — and read as none, never silently. `what` completes "… could not be listed".
 */
export const namesIn = (fs: FileSystem.FileSystem, dir: string, what: string) =>
  fs.readDirectory(dir).pipe(Effect.catchAll((e) =>
    isNotFound(e)
      ? Effect.succeed<ReadonlyArray<string>>([])
      : Effect.logWarning(`${what} could not be listed (${e.message}): what is in ${dir} is left out until it can`).pipe(
        Effect.as<ReadonlyArray<string>>([])
      )
  ))
