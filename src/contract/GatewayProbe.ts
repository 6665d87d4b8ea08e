import { Context, Effect, Layer, Schema } from "effect"

/** The gateway's `/healthz` answer: whose deployment it serves and which version. */
export const Health = Schema.Struct({
  ok: Schema.Boolean,
  config_root: Schema.optional(Schema.String),
  /** The deployment's short id: what a box's preflight compares (it never sees the host path). */
  deployment_id: Schema.optional(Schema.String),
  version: Schema.optional(Schema.String),
  /** Which connections have a credential in the daemon, and from where ("vault", "pi-login", "env"); never a value. */
  credentials: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String }))
})
export type Health = typeof Health.Type

/** Asks a gateway whether it is up and whose it is. Test layer: a scripted answer. */
export class GatewayProbe extends Context.Tag("roster/GatewayProbe")<GatewayProbe, {
  readonly health: (port: number) => Effect.Effect<Health | undefined>
}>() {
  static readonly layer = Layer.succeed(GatewayProbe, {
    health: (port) =>
      Effect.tryPromise(async (signal) => {
        const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal })
        return res.ok ? await res.text() : undefined
      }).pipe(
        Effect.flatMap((text) => (text === undefined ? Effect.succeed(undefined) : Schema.decode(Schema.parseJson(Health))(text))),
        Effect.timeout("2 seconds"),
        Effect.orElseSucceed(() => undefined)
      )
  })

  static readonly layerTest = (answer: (port: number) => Health | undefined) =>
    Layer.succeed(GatewayProbe, { health: (port) => Effect.succeed(answer(port)) })
}
