import { SqlClient } from "@effect/sql/SqlClient"
import { Context, Effect, Layer } from "effect"
import { OrgConfig } from "../config/OrgConfig.js"
import { Vault } from "../vault/Vault.js"
import { fleetSqlLayer, whereOf } from "./connect.js"

/** Why the fleet's database could not be had, and what fixes it. */
export interface Unavailable {
  readonly detail: string
  readonly fix: string
}

/**
 * The fleet's database for a process that is not its daemon (a CLI command), connected on first
 * use and kept for the process's scope: a command that never needs it never waits for it, and
 * the stores that do (memory, tasks, the run index) share one small pool. Gives the client and
 * where it is, for the store built over it.
 */
export class FleetSqlOnDemand extends Context.Tag("roster/FleetSqlOnDemand")<
  FleetSqlOnDemand,
  Effect.Effect<{ readonly sql: SqlClient; readonly where: string }, Unavailable>
>() {
  static readonly layer = Layer.scoped(FleetSqlOnDemand, Effect.gen(function*() {
    const scope = yield* Effect.scope
    const org = yield* OrgConfig
    const vault = yield* Vault
    return yield* Effect.cached(Effect.gen(function*() {
      const o = yield* org.snapshot.pipe(Effect.mapError((e): Unavailable => ({ detail: e.message, fix: "roster doctor names the error" })))
      const cluster = o.cluster
      if (!cluster) return yield* Effect.fail<Unavailable>({ detail: "org.toml has no [cluster]", fix: "restore [cluster] in org.toml" })
      // Interruptible though a first use may come inside an acquire: the client's own fibers inherit
      // it, and one that cannot be interrupted holds the process open when its scope closes.
      const ctx = yield* Effect.interruptible(Layer.buildWithScope(fleetSqlLayer(cluster, { maxConnections: 2 }), scope)).pipe(
        Effect.mapError((e): Unavailable => ({ detail: e.message, fix: "check that the database answers: roster doctor" })),
        Effect.provideService(Vault, vault)
      )
      return { sql: Context.get(ctx, SqlClient), where: whereOf(cluster) }
    }))
  }))
}
