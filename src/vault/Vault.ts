import { FileSystem, Path } from "@effect/platform"
import { Context, Effect, Layer, Schema } from "effect"
import { Paths, layout } from "../config/Paths.js"
import { readJsonOptional, writeJson } from "../fs/atomic.js"

export class VaultError extends Schema.TaggedError<VaultError>()("VaultError", { detail: Schema.String }) {
  override get message() {
    return `the vault: ${this.detail}`
  }
}

/** Connection names double as file names: nothing that could climb out of the vault. */
export const isConnectionName = (name: string) => /^[a-z0-9][a-z0-9._-]{0,63}$/.test(name)

export type VaultEntry = Readonly<Record<string, unknown>>

/**
 * Stored credentials (data/vault: dir 0700, files 0600, written atomically). Only the host
 * side reads them: the gateway to inject, the provisioner to shape sentinels. Never a box.
 */
export class Vault extends Context.Tag("roster/Vault")<Vault, {
  readonly get: (name: string) => Effect.Effect<VaultEntry | undefined>
  readonly put: (name: string, entry: VaultEntry) => Effect.Effect<void, VaultError>
  readonly remove: (name: string) => Effect.Effect<boolean, VaultError>
  readonly list: Effect.Effect<ReadonlyArray<{ readonly name: string; readonly entry: VaultEntry }>>
}>() {
  static readonly layer = Layer.effect(
    Vault,
    Effect.gen(function*() {
      const dir = layout(yield* Paths).vaultDir
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const ctx = yield* Effect.context<FileSystem.FileSystem | Path.Path>()
      const fileOf = (name: string) => path.join(dir, `${name}.json`)
      const get = (name: string) =>
        isConnectionName(name)
          ? readJsonOptional(fileOf(name)).pipe(
            Effect.map((v) => (v && typeof v === "object" && !Array.isArray(v) ? v as VaultEntry : undefined)),
            Effect.provide(ctx)
          )
          : Effect.succeed(undefined)
      const ensureDir = fs.makeDirectory(dir, { recursive: true, mode: 0o700 }).pipe(Effect.zipRight(fs.chmod(dir, 0o700)))
      return {
        get,
        put: (name, entry) =>
          isConnectionName(name)
            ? ensureDir.pipe(
              Effect.zipRight(writeJson(fileOf(name), entry, 0o600)),
              Effect.mapError((e) => new VaultError({ detail: e.message })),
              Effect.provide(ctx)
            )
            : Effect.fail(new VaultError({ detail: `"${name}" is not a connection name (a-z, 0-9, ".", "_", "-")` })),
        remove: (name) =>
          isConnectionName(name)
            ? fs.exists(fileOf(name)).pipe(
              Effect.flatMap((present) => (present ? fs.remove(fileOf(name)).pipe(Effect.as(true)) : Effect.succeed(false))),
              Effect.mapError((e) => new VaultError({ detail: e.message }))
            )
            : Effect.succeed(false),
        list: fs.readDirectory(dir).pipe(
          Effect.orElseSucceed(() => [] as Array<string>),
          Effect.flatMap((files) =>
            Effect.forEach(files.filter((f) => f.endsWith(".json")).sort(), (f) =>
              get(f.slice(0, -5)).pipe(Effect.map((entry) => (entry ? [{ name: f.slice(0, -5), entry }] : []))))
          ),
          Effect.map((xs) => xs.flat())
        )
      }
    })
  )

  static readonly layerTest = (entries: Record<string, VaultEntry>) =>
    Layer.sync(Vault, () => {
      const store = new Map(Object.entries(entries))
      return {
        get: (name) => Effect.sync(() => store.get(name)),
        put: (name, entry) => Effect.sync(() => void store.set(name, entry)),
        remove: (name) => Effect.sync(() => store.delete(name)),
        list: Effect.sync(() => [...store.entries()].sort().map(([name, entry]) => ({ name, entry })))
      }
    })
}
