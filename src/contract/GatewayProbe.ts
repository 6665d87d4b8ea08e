import { Context, Effect, Layer, Schema } from "effect"
import * as http from "node:http"

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
    // node:http, not fetch: the first fetch in a process loads undici (measured: 25–29 ms and 6 MB, against 9 ms).
    health: (port) =>
      Effect.async<string | undefined, Error>((resume) => {
        const req = http.get({ host: "127.0.0.1", port, path: "/healthz", agent: false }, (res) => {
          let body = ""
          res.setEncoding("utf8")
          res.on("data", (c: string) => (body += c))
          res.on("end", () => resume(Effect.succeed(res.statusCode === 200 ? body : undefined)))
          res.on("error", (e) => resume(Effect.fail(e)))
        })
        req.on("error", (e) => resume(Effect.fail(e)))
        return Effect.sync(() => req.destroy())
      }).pipe(
        Effect.flatMap((text) => (text === undefined ? Effect.succeed(undefined) : Schema.decode(Schema.parseJson(Health))(text))),
        Effect.timeout("2 seconds"),
        // No answer within 2 s, or not one: not up, which is what a caller asks (it says what to do).
        Effect.orElseSucceed(() => undefined)
      )
  })

  static readonly layerTest = (answer: (port: number) => Health | undefined) =>
    Layer.succeed(GatewayProbe, { health: (port) => Effect.succeed(answer(port)) })
}
