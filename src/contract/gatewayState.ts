import { Effect, Schema } from "effect"
import { Paths, layout } from "../config/Paths.js"
import { readJsonOptional, writeJson } from "../fs/atomic.js"

/** `state/gateway.json`: where the running daemon listens, so boxes and the CLI follow it. */
export const GatewayState = Schema.Struct({
  port: Schema.Number,
  addrs: Schema.Array(Schema.String),
  /** Where boxes reach it (host.docker.internal): the locked network's bridge, or the first address `--addr` / `[gateway] listen` named. */
  box_addr: Schema.optional(Schema.String),
  pid: Schema.Number,
  config_root: Schema.String,
  version: Schema.String,
  started_at: Schema.String,
  log: Schema.optional(Schema.String)
})
export type GatewayState = typeof GatewayState.Type

/** The gateway.json in a state dir (any deployment's: `roster doctor` reads others'). */
export const readGatewayStateAt = (file: string) =>
  readJsonOptional(file).pipe(
    Effect.map((raw) => Schema.decodeUnknownOption(GatewayState)(raw).pipe((o) => (o._tag === "Some" ? o.value : undefined)))
  )

export const readGatewayState = Effect.flatMap(Paths, (paths) => readGatewayStateAt(layout(paths).gatewayJson))

export const writeGatewayState = (state: GatewayState) =>
  Effect.gen(function*() {
    yield* writeJson(layout(yield* Paths).gatewayJson, state)
  })
