import { FileSystem } from "@effect/platform"
import { Effect, Option } from "effect"
import { fileURLToPath } from "node:url"

/** The build this process runs, from the bundle's last line (scripts/bundle.mjs); none when not run from a bundle. */
export const ownBuild = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const file = fileURLToPath(import.meta.url)
  const size = Number((yield* fs.stat(file)).size)
  const handle = yield* fs.open(file)
  yield* handle.seek(Math.max(0, size - 64), "start")
  const tail = Option.getOrElse(yield* handle.readAlloc(Math.min(64, size)), () => new Uint8Array())
  return /\/\/# roster-build=([0-9a-f]+)\n$/.exec(Buffer.from(tail).toString("latin1"))?.[1]
// No stamp readable: not a packed build, so nothing is handed to a daemon that may be another build.
}).pipe(Effect.scoped, Effect.orElseSucceed(() => undefined))
