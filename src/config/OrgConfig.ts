import { FileSystem } from "@effect/platform"
import { Config, Context, Effect, Either, Layer, Option, Ref, Schema } from "effect"
import { makeStampCache } from "../fs/stamp.js"
import { ConfigError, readTomlIn } from "./decode.js"
import { Paths, layout } from "./Paths.js"
import { compilePolicy, type Policy } from "./policy.js"
import { type Org, OrgSchema } from "./schema.js"

interface Decoded {
  readonly stamp: string
  readonly result: Either.Either<Org, ConfigError>
  /** The egress policy compiled from this decode: once per edit of the file, never per request. */
  readonly policy: Either.Either<Policy, ConfigError>
}

const MISSING = "does not exist"

const missing = (file: string) =>
  new ConfigError({ file, problems: [{ key: "", problem: MISSING }], hint: "create it with safe defaults: roster init" })

/** Whether org.toml's error is that there is none yet (before roster init), not one that is wrong. */
export const isMissingOrg = (e: ConfigError) => e.problems.some((p) => p.problem === MISSING)

/**
 * The keys a fleet's nodes set each for itself, from the environment, so every node can hold the
 * same org.toml: ROSTER_GATEWAY_PORT for `[gateway] port` (ROSTER_NODE, for `[cluster] node`, is
 * read where the node's name is taken).
 */
const gatewayPortVar = Config.option(Config.string("ROSTER_GATEWAY_PORT")).pipe(Effect.orElseSucceed(() => Option.none<string>()))

const perNode = (org: Org, gatewayPort: Option.Option<string>): Effect.Effect<Org, ConfigError> => {
  if (Option.isNone(gatewayPort) || gatewayPort.value === "") return Effect.succeed(org)
  const port = Number(gatewayPort.value)
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    return Effect.fail(new ConfigError({
      file: "the environment",
      problems: [{ key: "ROSTER_GATEWAY_PORT", problem: `${gatewayPort.value} is not a port (1–65535)` }],
      hint: "set ROSTER_GATEWAY_PORT to this node's gateway port, or unset it to use [gateway] port in org.toml"
    }))
  }
  return Effect.succeed({ ...org, gateway: { ...org.gateway, port } })
}

/**
 * `org.toml`, decoded. Each `snapshot` looks at the file (one stat) so a long-lived daemon
 * follows edits at once, without a restart; the file is read and decoded again only when it
 * changed — the gateway asks on every request, and a parse per request cost ~0.7 ms of each.
 * One run works from one consistent snapshot.
 */
export class OrgConfig extends Context.Tag("roster/OrgConfig")<OrgConfig, {
  readonly snapshot: Effect.Effect<Org, ConfigError>
  /** The egress policy of the same snapshot, compiled when it was decoded (config/policy.ts). */
  readonly policy: Effect.Effect<Policy, ConfigError>
}>() {
  static readonly layer = Layer.effect(
    OrgConfig,
    Effect.gen(function*() {
      // Its files are taken here, once: the deployment's org.toml and the file system it is read through.
      const file = layout(yield* Paths).orgToml
      const read = readTomlIn(yield* FileSystem.FileSystem)
      const decoded = yield* Ref.make<Decoded | undefined>(undefined)
      // Looked at twice a second at most: an edit takes effect within half a second.
      const stamps = makeStampCache(500)
      const current = Effect.gen(function*() {
        const stamp = yield* stamps.stamp(file)
        if (Option.isNone(stamp)) return yield* Effect.fail(missing(file))
        const known = yield* Ref.get(decoded)
        if (known && known.stamp === stamp.value) return known
        const result = yield* read(OrgSchema, file, Effect.fail(missing(file))).pipe(
          // The node's own port, read with the file (the caller's configuration: a test gives its own).
          Effect.flatMap((org) => Effect.flatMap(gatewayPortVar, (port) => perNode(org, port))),
          Effect.either
        )
        const made: Decoded = { stamp: stamp.value, result, policy: Either.map(result, compilePolicy) }
        yield* Ref.set(decoded, made)
        return made
      })
      return {
        snapshot: Effect.flatMap(current, (d) => d.result),
        policy: Effect.flatMap(current, (d) => d.policy)
      }
    })
  )

  static readonly layerTest = (org: Partial<Schema.Schema.Encoded<typeof OrgSchema>> = {}) => OrgConfig.fromOrg(Schema.decodeUnknownSync(OrgSchema)(org))

  /** A decoded org.toml as the service (its policy compiled once): a test's, an embedder's. */
  static readonly fromOrg = (org: Org) => {
    const policy = compilePolicy(org)
    return Layer.succeed(OrgConfig, { snapshot: Effect.succeed(org), policy: Effect.succeed(policy) })
  }

  /** The service over a snapshot that may change between reads (a test's): its policy compiled at each read. */
  static readonly fromSnapshot = (snapshot: Effect.Effect<Org, ConfigError>) =>
    Layer.succeed(OrgConfig, { snapshot, policy: Effect.map(snapshot, compilePolicy) })
}

export const defaultOrg = (): Org => Schema.decodeUnknownSync(OrgSchema)({})
