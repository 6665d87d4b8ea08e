import { FileSystem, Path } from "@effect/platform"
import { Context, Effect, Layer } from "effect"
import { Paths, layout } from "../config/Paths.js"
import { readJsonOptional } from "../fs/files.js"

/** Stored credentials (data/vault, dir 0700, files 0600), read by name. Only the host side ever reads them. */
export class Vault extends Context.Tag("roster/Vault")<Vault, {
  readonly get: (name: string) => Effect.Effect<Readonly<Record<string, unknown>> | undefined>
}>() {
  static readonly layer = Layer.effect(
    Vault,
    Effect.gen(function*() {
      const dir = layout(yield* Paths).vaultDir
      const ctx = yield* Effect.context<FileSystem.FileSystem | Path.Path>()
      const path = yield* Path.Path
      return {
        get: (name) =>
          /^[a-z0-9][a-z0-9._-]{0,63}$/.test(name)
            ? readJsonOptional(path.join(dir, `${name}.json`)).pipe(
              Effect.map((v) => (v && typeof v === "object" && !Array.isArray(v) ? v as Record<string, unknown> : undefined)),
              Effect.provide(ctx)
            )
            : Effect.succeed(undefined)
      }
    })
  )

  static readonly layerTest = (entries: Record<string, Record<string, unknown>>) =>
    Layer.succeed(Vault, { get: (name) => Effect.succeed(entries[name]) })
}
