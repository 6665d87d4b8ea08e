import { Context, Effect, Layer, Schema } from "effect"
import { FileSystem } from "@effect/platform"
import { ConfigError, readToml } from "./decode.js"
import { Paths, layout } from "./Paths.js"
import { type Org, OrgSchema } from "./schema.js"

/**
 * `org.toml`, decoded. `snapshot` reads the file anew each call so a long-lived daemon
 * follows edits without a restart, while one run works from one consistent snapshot.
 */
export class OrgConfig extends Context.Tag("roster/OrgConfig")<OrgConfig, {
  readonly snapshot: Effect.Effect<Org, ConfigError, Paths | FileSystem.FileSystem>
}>() {
  static readonly layer = Layer.succeed(OrgConfig, {
    snapshot: Effect.gen(function*() {
      const file = layout(yield* Paths).orgToml
      return yield* readToml(OrgSchema, file, Effect.fail(new ConfigError({
        file,
        problems: [{ key: "", problem: "does not exist" }],
        hint: "create it with safe defaults: roster init"
      })))
    })
  })

  static readonly layerTest = (org: Partial<Schema.Schema.Encoded<typeof OrgSchema>> = {}) =>
    Layer.succeed(OrgConfig, { snapshot: Effect.succeed(Schema.decodeUnknownSync(OrgSchema)(org)) })
}

export const defaultOrg = (): Org => Schema.decodeUnknownSync(OrgSchema)({})
