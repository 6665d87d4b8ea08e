import { Path } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { Effect } from "effect"
import { Files } from "./Files.js"

/** Hands a tree to another user without following a link planted in it. */
export const lchownTree = (root: string, uid: number, gid: number): Effect.Effect<void, PlatformError, Files | Path.Path> =>
  Effect.gen(function*() {
    const files = yield* Files
    const path = yield* Path.Path
    yield* files.lchown(root, uid, gid)
    for (const e of yield* files.list(root).pipe(Effect.orElseSucceed(() => []))) {
      const p = path.join(root, e.name)
      if (e.kind === "directory") yield* lchownTree(p, uid, gid)
      else yield* files.lchown(p, uid, gid)
    }
  })
