import type { PlatformError } from "@effect/platform/Error"
import { SystemError } from "@effect/platform/Error"
import { Context, Effect, Layer } from "effect"
import * as fsp from "node:fs/promises"
import { batchedWrite } from "./batchedWrite.js"

/** An open file each write appends to (see `Files.openAppend`). */
export interface Appender {
  /**
   * Appends `text`; gives the byte offset it was written at — counted from the file's size when
   * opened, so true while this appender is the file's only writer — or -1 once a failed write has
   * left the count unknown.
   */
  readonly write: (text: string) => Effect.Effect<number, PlatformError>
  /**
   * `write` for a caller that is not a fiber (the gateway's common request): the line joins the
   * queue at once, in order with every other; the promise settles as `write` would.
   */
  readonly push: (text: string) => Promise<number>
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
      io("open", file, async () => {
        const handle = await fsp.open(file, "a", mode)
        return { handle, size: await handle.stat().then((s) => s.size, () => -1) }
      }).pipe(Effect.uninterruptible, Effect.map(({ handle, size: opened }): Appender => {
        const lines = batchedWrite((text) => handle.write(text))
        let size = opened
        // The offset is taken as the line joins the queue: lines are written in the order they join.
        const push = (text: string) => {
          const at = size
          if (size >= 0) size += Buffer.byteLength(text)
          return lines.write(text).then(() => at, (e: unknown) => {
            size = -1
            throw e
          })
        }
        return {
          write: (text) => io("write", file, () => push(text)),
          push,
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
