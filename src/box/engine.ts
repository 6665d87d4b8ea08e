import { FileSystem, Path } from "@effect/platform"
import { Effect, Option, Schema } from "effect"
import * as C from "../contract/constants.js"
import type { Engine } from "../backend/plan.js"
import { namesIn } from "../fs/namesIn.js"

export class EngineError extends Schema.TaggedError<EngineError>()("EngineError", {
  dir: Schema.String,
  detail: Schema.String
}) {
  override get message() {
    return `[engine] dir = "${this.dir}" cannot be used: ${this.detail} (run npm ci in that checkout, or remove [engine] dir to use the image's engine)`
  }
}

const PiPackage = Schema.parseJson(Schema.Struct({
  bin: Schema.optional(Schema.Union(Schema.String, Schema.Record({ key: Schema.String, value: Schema.String })))
}))

/**
 * A dev checkout mounted read-only instead of the baked engine: pi's real JS entry from its
 * package.json `bin` (the npm shim is a shell script) and every box/extensions/*.ts, sorted.
 */
export const resolveMountedEngine = Effect.fn("engine.resolveMounted")(function*(dir: string) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const fail = (detail: string) => new EngineError({ dir, detail })
  const root = yield* fs.realPath(dir).pipe(Effect.mapError((e) => fail(`reading the checkout: ${e.message}`)))
  const inBox = (p: string) => `${C.MOUNTED_ENGINE}/${path.relative(root, p).split(path.sep).join("/")}`
  // pi installed in the checkout itself, or in its box/engine (npm ci --prefix box/engine).
  const candidates = ["node_modules", "box/engine/node_modules"].map((d) => path.join(root, d, "@earendil-works/pi-coding-agent"))
  const found = yield* Effect.findFirst(candidates, (c) => fs.exists(c).pipe(Effect.orElseSucceed(() => false)))
  if (Option.isNone(found)) return yield* Effect.fail(fail("pi is not installed there (npm ci --prefix box/engine)"))
  const pkgDir = yield* fs.realPath(found.value).pipe(Effect.mapError((e) => fail(e.message)))
  const pkg = yield* fs.readFileString(path.join(pkgDir, "package.json")).pipe(
    Effect.flatMap(Schema.decode(PiPackage)),
    Effect.mapError(() => fail("pi's package.json cannot be read"))
  )
  const bin = typeof pkg.bin === "string" ? pkg.bin : pkg.bin?.pi
  if (!bin) return yield* Effect.fail(fail("pi's package.json has no bin"))
  const entry = path.join(pkgDir, bin)
  if (!entry.startsWith(`${root}${path.sep}`)) return yield* Effect.fail(fail(`pi resolves outside the checkout (${entry})`))
  const extDir = path.join(root, "box/extensions")
  const exts = (yield* namesIn(fs, extDir, "the engine's extensions")).filter((f) => f.endsWith(".ts")).sort()
  return {
    kind: "mounted",
    hostDir: root,
    entry: inBox(entry),
    extensions: exts.map((f) => inBox(path.join(extDir, f)))
  } satisfies Engine
})
