import { Effect, Schema } from "effect"
import { Paths, layout } from "../config/Paths.js"
import { readJsonOptional, writeJson } from "../fs/atomic.js"

/** `state/gateway.json`: where the running daemon listens, so boxes and the CLI follow it. */
export const GatewayState = Schema.Struct({
  port: Schema.Number,
  addrs: Schema.Array(Schema.String),
  pid: Schema.Number,
  config_root: Schema.String,
  version: Schema.String,
  started_at: Schema.String,
  log: Schema.optional(Schema.String)
})
export type GatewayState = typeof GatewayState.Type

export const readGatewayState = Effect.gen(function*() {
  const file = layout(yield* Paths).gatewayJson
  const raw = yield* readJsonOptional(file)
  return Schema.decodeUnknownOption(GatewayState)(raw).pipe((o) => (o._tag === "Some" ? o.value : undefined))
})

export const writeGatewayState = (state: GatewayState) =>
  Effect.gen(function*() {
    yield* writeJson(layout(yield* Paths).gatewayJson, state)
  })
