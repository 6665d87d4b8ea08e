import { FileSystem, Path } from "@effect/platform"
import { Effect } from "effect"
import * as crypto from "node:crypto"

/**
 * Write to a temp file beside the target, then rename: a reader (or a crash) never sees half
 * a file. `mode` is applied before the rename so a secret is never briefly world-readable.
 */
export const writeAtomic = Effect.fn("files.writeAtomic")(function*(
  file: string,
  content: string | Uint8Array,
  mode = 0o644
) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  yield* fs.makeDirectory(path.dirname(file), { recursive: true })
  const tmp = `${file}.${crypto.randomBytes(4).toString("hex")}.tmp`
  const bytes = typeof content === "string" ? new TextEncoder().encode(content) : content
  yield* fs.writeFile(tmp, bytes, { mode })
  yield* fs.chmod(tmp, mode)
  yield* fs.rename(tmp, file).pipe(Effect.tapError(() => fs.remove(tmp).pipe(Effect.ignore)))
})

export const writeJson = (file: string, value: unknown, mode = 0o644) =>
  writeAtomic(file, `${JSON.stringify(value, null, 2)}\n`, mode)

/** A JSON file's contents, or undefined when it is missing or unreadable. */
export const readJsonOptional = Effect.fn("files.readJsonOptional")(function*(file: string) {
  const fs = yield* FileSystem.FileSystem
  return yield* fs.readFileString(file).pipe(
    Effect.flatMap((text) => Effect.try(() => JSON.parse(text) as unknown)),
    Effect.orElseSucceed(() => undefined)
  )
})
