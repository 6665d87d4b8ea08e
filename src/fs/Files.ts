import type { PlatformError } from "@effect/platform/Error"
import { SystemError } from "@effect/platform/Error"
import { Context, Effect, Layer } from "effect"
import * as fsp from "node:fs/promises"
import { batchedWrite } from "./batchedWrite.js"

/** An open file each write appends to (see `Files.openAppend`). */
export interface Appender {
  readonly write: (text: string) => Effect.Effect<void, PlatformError>
  readonly close: Effect.Effect<void>
}

export type EntryKind = "file" | "directory" | "symlink" | "other"

export interface Entry {
  readonly name: string
  readonly kind: EntryKind
}

/**
 * The file calls `@effect/platform`'s FileSystem lacks and roster needs where a box has
 * written: listing without following symlinks, `lchown`, and appends with a mode. Everything
 * else goes through FileSystem. Test layers wrap it to fail or hang a call.
 */
export class Files extends Context.Tag("roster/Files")<Files, {
  /** A folder's entries, each with its own kind: a symlink is reported as one, never followed. */
  readonly list: (dir: string) => Effect.Effect<ReadonlyArray<Entry>, PlatformError>
  readonly lchown: (path: string, uid: number, gid: number) => Effect.Effect<void, PlatformError>
  readonly append: (file: string, text: string, mode?: number) => Effect.Effect<void, PlatformError>
  /**
   * A file kept open for appending: each `write` appends a whole line, never serialised behind a
   * lock (the platform's File keeps a position and a semaphore); lines written while one is in
   * flight go out together in the next write (batchedWrite).
   */
  readonly openAppend: (file: string, mode?: number) => Effect.Effect<Appender, PlatformError>
}>() {
  static readonly layer = Layer.succeed(Files, {
    list: (dir) =>
      io("list", dir, async () =>
        (await fsp.readdir(dir, { withFileTypes: true })).map((d) => ({
          name: d.name,
          kind: d.isSymbolicLink() ? "symlink" : d.isDirectory() ? "directory" : d.isFile() ? "file" : "other"
        } satisfies Entry))),
    lchown: (path, uid, gid) => io("lchown", path, () => fsp.lchown(path, uid, gid)),
    append: (file, text, mode = 0o600) => io("append", file, () => fsp.appendFile(file, text, { mode })),
    // Uninterruptible: a caller interrupted mid-open would abandon a handle that no one closes.
    openAppend: (file, mode = 0o600) =>
      io("open", file, () => fsp.open(file, "a", mode)).pipe(Effect.uninterruptible, Effect.map((handle): Appender => {
        const lines = batchedWrite((text) => handle.write(text))
        return {
          write: (text) => io("write", file, () => lines.write(text)),
          close: Effect.promise(() => lines.drained().then(() => handle.close()).catch(() => undefined))
        }
      }))
  })
}

const io = <A>(method: string, path: string, f: () => Promise<A>) =>
  Effect.tryPromise({
    try: f,
    catch: (e) =>
      new SystemError({
        reason: (e as NodeJS.ErrnoException).code === "ENOENT" ? "NotFound" : "Unknown",
        module: "FileSystem",
        method,
        pathOrDescriptor: path,
        description: e instanceof Error ? e.message : String(e)
      })
  })
