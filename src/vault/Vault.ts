import { FileSystem, Path } from "@effect/platform"
import { Context, Effect, Layer, Option, Ref, Schema } from "effect"
import { Paths, layout } from "../config/Paths.js"
import { atomicIn } from "../fs/atomic.js"
import { makeStampCache } from "../fs/stamp.js"
import { namesIn } from "../fs/namesIn.js"

/** A vault write that failed, or a connection name it refuses. */
export class VaultError extends Schema.TaggedError<VaultError>()("VaultError", { detail: Schema.String }) {
  override get message() {
    return `the vault: ${this.detail}`
  }
}

/** Connection names double as file names: nothing that could climb out of the vault. */
export const isConnectionName = (name: string) => /^[a-z0-9][a-z0-9._-]{0,63}$/.test(name)

/** One stored connection: its fields as `roster connection add` wrote them. */
export type VaultEntry = Readonly<Record<string, unknown>>

/** A JSON object of named fields: a vault entry, a pi login, pi's auth.json as a whole. */
export const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })
const decodeEntry = Schema.decodeUnknownOption(JsonObject)

/** A JSON value as an object of fields, or `{}` when it is not one. */
export const asJsonObject = (v: unknown): Readonly<Record<string, unknown>> => Option.getOrElse(decodeEntry(v), () => ({}))

/**
 * Stored credentials (data/vault: dir 0700, files 0600, written atomically). Only the host
 * side reads them: the gateway to inject, the provisioner to shape sentinels. Never a box.
 */
export class Vault extends Context.Tag("roster/Vault")<Vault, {
  readonly get: (name: string) => Effect.Effect<VaultEntry | undefined, never>
  readonly put: (name: string, entry: VaultEntry) => Effect.Effect<void, VaultError>
  readonly remove: (name: string) => Effect.Effect<boolean, VaultError>
  readonly list: Effect.Effect<ReadonlyArray<{ readonly name: string; readonly entry: VaultEntry }>>
}>() {
  /**
   * The deployment's vault folder (its Paths and FileSystem captured when built). An entry is read again only when its file
   * changed (one stat): the gateway asks on every request it injects.
   */
  static readonly layer = Layer.effect(Vault, Effect.gen(function*() {
    // What it reads and writes through is taken here, once: the vault folder and the file services.
    const fs = yield* FileSystem.FileSystem
    const files = atomicIn(fs, yield* Path.Path)
    const dir = layout(yield* Paths).vaultDir
    const vaultFile = (name: string) => `${dir}/${name}.json`
    const getEntry = (name: string) => files.readJsonOptional(vaultFile(name)).pipe(Effect.map((v) => Option.getOrUndefined(decodeEntry(v))))
    const read = yield* Ref.make(new Map<string, { readonly stamp: string; readonly entry: VaultEntry | undefined }>())
    // Looked at twice a second at most (the gateway asks on every request it injects): another
    // process's edit is seen within half a second, this one's own at once.
    const stamps = makeStampCache(500)
    const get = (name: string) =>
      isConnectionName(name)
        ? Effect.gen(function*() {
          const file = vaultFile(name)
          const stamp = yield* stamps.stamp(file)
          if (Option.isNone(stamp)) return undefined
          const known = (yield* Ref.get(read)).get(file)
          if (known && known.stamp === stamp.value) return known.entry
          const entry = yield* getEntry(name)
          yield* Ref.update(read, (m) => new Map(m).set(file, { stamp: stamp.value, entry }))
          return entry
        })
        : Effect.succeed(undefined)
    return {
      get,
      put: (name, entry) =>
        isConnectionName(name)
          ? Effect.gen(function*() {
            yield* fs.makeDirectory(dir, { recursive: true, mode: 0o700 })
            yield* fs.chmod(dir, 0o700)
            yield* files.writeJson(vaultFile(name), entry, 0o600)
            yield* stamps.forget(vaultFile(name))
          }).pipe(Effect.mapError((e) => new VaultError({ detail: e.message })))
          : Effect.fail(new VaultError({ detail: `"${name}" is not a connection name (a-z, 0-9, ".", "_", "-")` })),
      remove: (name) =>
        isConnectionName(name)
          ? Effect.gen(function*() {
            const file = vaultFile(name)
            if (!(yield* fs.exists(file))) return false
            yield* fs.remove(file)
            yield* stamps.forget(file)
            return true
          }).pipe(Effect.mapError((e) => new VaultError({ detail: e.message })))
          : Effect.succeed(false),
      list: Effect.gen(function*() {
        const names = yield* namesIn(fs, dir, "the vault's connections")
        const out: Array<{ readonly name: string; readonly entry: VaultEntry }> = []
        for (const f of names.filter((n) => n.endsWith(".json")).sort()) {
          const name = f.slice(0, -5)
          const entry = isConnectionName(name) ? yield* getEntry(name) : undefined
          if (entry) out.push({ name, entry })
        }
        return out
      })
    }
  }))

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
