import { FileSystem, Path } from "@effect/platform"
import { Effect } from "effect"
import * as crypto from "node:crypto"

/**
 * The atomic writes and JSON reads through file services taken once (a store's, when its layer is
 * built): each call needs nothing of its caller.
 */
export const atomicIn = (fs: FileSystem.FileSystem, path: Path.Path) => {
  /**
   * Write to a temp file beside the target, then rename: a reader (or a crash) never sees half
   * a file. `mode` is applied before the rename so a secret is never briefly world-readable.
   */
  const writeAtomic = (file: string, content: string | Uint8Array, mode = 0o644) =>
    Effect.gen(function*() {
      yield* fs.makeDirectory(path.dirname(file), { recursive: true })
      const tmp = `${file}.${crypto.randomBytes(4).toString("hex")}.tmp`
      const bytes = typeof content === "string" ? new TextEncoder().encode(content) : content
      yield* fs.writeFile(tmp, bytes, { mode })
      yield* fs.chmod(tmp, mode)
      // The rename's own error is the one returned; the temp file's removal is a courtesy beside it.
      yield* fs.rename(tmp, file).pipe(Effect.tapError(() => fs.remove(tmp).pipe(Effect.ignore)))
    }).pipe(Effect.withSpan("files.writeAtomic"))
  return {
    writeAtomic,
    writeJson: (file: string, value: unknown, mode = 0o644) => writeAtomic(file, `${JSON.stringify(value, null, 2)}\n`, mode),
    /** A JSON file's contents, or undefined when it is missing or unreadable. */
    readJsonOptional: (file: string) => readJsonIn(fs)(file)
  }
}

/** A JSON file's contents through a file system taken once, or undefined when it is missing or unreadable. */
export const readJsonIn = (fs: FileSystem.FileSystem) => (file: string) =>
  fs.readFileString(file).pipe(
    Effect.flatMap((text) => Effect.try(() => JSON.parse(text) as unknown)),
    // Callers that must tell unreadable from missing read the file themselves (readRunContextOrWhy, the sweep's token read).
    Effect.orElseSucceed(() => undefined)
  )

const atomic = Effect.zipWith(FileSystem.FileSystem, Path.Path, atomicIn)

/** {@link atomicIn}'s write, through the caller's file services. */
export const writeAtomic = (file: string, content: string | Uint8Array, mode = 0o644) =>
  Effect.flatMap(atomic, (a) => a.writeAtomic(file, content, mode))

export const writeJson = (file: string, value: unknown, mode = 0o644) =>
  Effect.flatMap(atomic, (a) => a.writeJson(file, value, mode))

/** A JSON file's contents, or undefined when it is missing or unreadable. */
export const readJsonOptional = (file: string) => Effect.flatMap(FileSystem.FileSystem, (fs) => readJsonIn(fs)(file))
