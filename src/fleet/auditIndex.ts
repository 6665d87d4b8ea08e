import { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Layer, Option } from "effect"
import { AuditIndex, type AuditStart } from "../run/AuditIndex.js"
import { FleetSqlOnDemand } from "./firstUse.js"

/** The fleet's audit index over a database client: one row a run and day, its first offset the lowest said. */
export const auditIndexOver = (sql: SqlClient) =>
  AuditIndex.of({
    put: (starts) =>
      Effect.forEach(starts, (s) =>
        sql`INSERT INTO roster_audit (run_id, day, node, first_offset, requests)
          VALUES (${s.run_id}, ${s.day}, ${s.node}, ${s.offset}, ${s.requests})
          ON CONFLICT (run_id, day) DO UPDATE SET
            first_offset = least(roster_audit.first_offset, EXCLUDED.first_offset),
            requests = roster_audit.requests + EXCLUDED.requests`, { discard: true }),
    of: (runId) =>
      sql<{ readonly run_id: string; readonly day: string; readonly node: string; readonly offset: string; readonly requests: number }>`
        SELECT run_id, day, node, first_offset::text AS offset, requests FROM roster_audit WHERE run_id = ${runId} ORDER BY day`.withoutTransform.pipe(
        Effect.map((rows) =>
          rows.length === 0 ? Option.none() : Option.some(rows.map((r): AuditStart => ({ ...r, offset: Number(r.offset) })))
        ),
        // An unanswered index read is none: the caller reads the day files whole instead (slower, the same lines).
        Effect.orElseSucceed(() => Option.none())
      )
  })

/** The fleet's audit index on the daemon's own connection. */
export const fleetAuditIndex = Layer.effect(AuditIndex, Effect.map(SqlClient, auditIndexOver))

/** The fleet's audit index for a process that is not its daemon (`runs show`, `roster web`): on the process's shared connection. */
export const fleetAuditIndexOnDemand = Layer.effect(
  AuditIndex,
  Effect.map(FleetSqlOnDemand, (connected) =>
    AuditIndex.of({
      put: (starts) => Effect.flatMap(connected, (c) => auditIndexOver(c.sql).put(starts)),
      // The index's own reads never fail (an unanswered one is none); only the connection can.
      of: (runId) => connected.pipe(Effect.flatMap((c) => auditIndexOver(c.sql).of(runId)), Effect.orElseSucceed(() => Option.none()))
    }))
)
