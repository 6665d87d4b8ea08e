import { Context, Effect, Layer } from "effect"

export interface Health {
  readonly ok: boolean
  readonly config_root?: string
  readonly version?: string
}

/** Asks a gateway whether it is up and whose it is. Test layer: a scripted answer. */
export class GatewayProbe extends Context.Tag("roster/GatewayProbe")<GatewayProbe, {
  readonly health: (port: number) => Effect.Effect<Health | undefined>
}>() {
  static readonly layer = Layer.succeed(GatewayProbe, {
    health: (port) =>
      Effect.tryPromise(async (signal) => {
        const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal })
        if (!res.ok) return undefined
        return (await res.json()) as Health
      }).pipe(
        Effect.timeout("2 seconds"),
        Effect.orElseSucceed(() => undefined)
      )
  })

  static readonly layerTest = (answer: (port: number) => Health | undefined) =>
    Layer.succeed(GatewayProbe, { health: (port) => Effect.succeed(answer(port)) })
}
