import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Layer, Option, Schema } from "effect"
import { RunEvent } from "../run/events.js"
import { isTaintEvent, type TaintEvent, TaintLog, TaintLogError } from "../run/TaintLog.js"
import { FleetSqlOnDemand } from "./firstUse.js"
import { sqlDetail } from "./sqlDetail.js"

const decodeEvent = Schema.decodeUnknownOption(Schema.parseJson(RunEvent))
const unanswered = (e: SqlError) => new TaintLogError({ detail: sqlDetail(e) })

/** The fleet's taint log over a database client (`roster_taints`). */
export const taintLogOver = (sql: SqlClient) =>
  TaintLog.of({
    put: (runId, node, event) =>
      sql`INSERT INTO roster_taints (run_id, node, event) VALUES (${runId}, ${node}, ${JSON.stringify(event)}::jsonb)`.pipe(
        Effect.asVoid,
        Effect.mapError(unanswered)
      ),
    of: (runIds) =>
      runIds.length === 0
        ? Effect.succeed(new Map())
        : sql<{ readonly run_id: string; readonly event: string }>`
          SELECT run_id, event::text AS event FROM roster_taints WHERE run_id IN ${sql.in(runIds)} ORDER BY seq`.withoutTransform.pipe(
          Effect.map((rows) => {
            const out = new Map<string, Array<TaintEvent>>()
            for (const r of rows) {
              // A row a newer roster wrote in a shape this one does not know is left out, not fatal to the read.
              const e = Option.filter(decodeEvent(r.event), isTaintEvent)
              if (Option.isSome(e)) out.set(r.run_id, out.get(r.run_id)?.concat(e.value) ?? [e.value])
            }
            return out
          }),
          Effect.mapError(unanswered)
        )
  })

/** The fleet's taint log on the daemon's own connection. */
export const fleetTaintLog = Layer.effect(TaintLog, Effect.map(SqlClient, taintLogOver))

/** The fleet's taint log for a process that is not its daemon (`runs untaint`, `runs show`, a `worker run`'s gateway reads): on the process's shared connection. */
export const fleetTaintLogOnDemand = Layer.effect(
  TaintLog,
  Effect.map(FleetSqlOnDemand, (connected) => {
    const log = connected.pipe(
      Effect.map((c) => taintLogOver(c.sql)),
      Effect.mapError((e) => new TaintLogError({ detail: e.detail }))
    )
    return TaintLog.of({
      put: (runId, node, event) => Effect.flatMap(log, (l) => l.put(runId, node, event)),
      of: (runIds) => Effect.flatMap(log, (l) => l.of(runIds))
    })
  })
)
