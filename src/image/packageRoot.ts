import { FileSystem, Path } from "@effect/platform"
import { Effect } from "effect"
import { fileURLToPath } from "node:url"

/** The roster checkout or installed package this code runs from (holds box/). Works from src/ and dist/. */
export const packageRoot = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const here = fileURLToPath(import.meta.url)
  let dir = path.dirname(here)
  for (;;) {
    if ((yield* fs.exists(path.join(dir, "package.json"))) && (yield* fs.exists(path.join(dir, "box")))) return dir
    const up = path.dirname(dir)
    if (up === dir) return yield* Effect.dieMessage(`roster's package root (with box/) was not found above ${here}`)
    dir = up
  }
}).pipe(Effect.orDie)
