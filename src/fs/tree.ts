import { FileSystem, Path } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { Effect } from "effect"
import { Files } from "./Files.js"

/** Hands a tree to another user without following a link planted in it. */
export const lchownTree = (root: string, uid: number, gid: number): Effect.Effect<void, PlatformError, Files | Path.Path> =>
  Effect.gen(function*() {
    const files = yield* Files
    const path = yield* Path.Path
    yield* files.lchown(root, uid, gid)
    // A folder that cannot be listed fails the hand-over (its caller says what it was doing): never half handed over unseen.
    for (const e of yield* files.list(root)) {
      const p = path.join(root, e.name)
      if (e.kind === "directory") yield* lchownTree(p, uid, gid)
      else yield* files.lchown(p, uid, gid)
    }
  })

/**
 * A copy of a tree a box may have written: folders and files copied, a symlink recreated as the
 * same link (never followed: a planted link must not make the host read one of its own files),
 * anything else (a fifo, a device) left out.
 */
export const copyTree = (from: string, to: string): Effect.Effect<void, PlatformError, FileSystem.FileSystem | Files | Path.Path> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const files = yield* Files
    const path = yield* Path.Path
    yield* fs.makeDirectory(to, { recursive: true })
    for (const entry of yield* files.list(from)) {
      const src = path.join(from, entry.name)
      const dst = path.join(to, entry.name)
      if (entry.kind === "symlink") yield* fs.symlink(yield* fs.readLink(src), dst)
      else if (entry.kind === "directory") yield* copyTree(src, dst)
      else if (entry.kind === "file") yield* fs.copyFile(src, dst)
    }
  })
