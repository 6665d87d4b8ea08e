import { SqlClient } from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { Effect, Layer, Schema } from "effect"
import { MemoryError, MemoryEvent, type MemoryLog, MemoryStore, memoryStoreOver } from "../memory/MemoryStore.js"
import { FleetSqlOnDemand } from "./firstUse.js"
import { sqlDetail } from "./sqlDetail.js"

const WHERE = "in the fleet's database (roster_memory)"
const FIX = "check that the database answers: roster doctor"
const decode = Schema.decodeUnknown(MemoryEvent)
const failed = (e: SqlError) => new MemoryError({ file: WHERE, detail: sqlDetail(e), fix: FIX })

/**
 * Worker memory in the fleet's database: a worker's events are its rows in order, and a change
 * holds the worker's advisory lock for its transaction, so two nodes writing one worker's memory
 * take turns (a bound is checked and filled by one writer, fleet-wide). Inside a run's fence the
 * change is part of the fence's transaction: a fenced run's memory never lands.
 */
export const fleetMemoryLog = (sql: SqlClient): MemoryLog => ({
  read: (worker) =>
    sql<{ readonly event: unknown }>`SELECT event FROM roster_memory WHERE worker = ${worker} ORDER BY seq`.pipe(
      Effect.mapError(failed),
      Effect.flatMap((rows) => Effect.forEach(rows, (r) => decode(r.event).pipe(Effect.option))),
      Effect.map((events) => events.flatMap((e) => (e._tag === "Some" ? [e.value] : [])))
    ),
  append: (worker, events) =>
    Effect.forEach(events, (e) => sql`INSERT INTO roster_memory (worker, event) VALUES (${worker}, ${JSON.stringify(e)}::jsonb)`, { discard: true })
      .pipe(Effect.mapError(failed)),
  exclusive: (worker, change) =>
    sql.withTransaction(sql`SELECT pg_advisory_xact_lock(hashtext(${`roster-memory:${worker}`}))`.pipe(Effect.zipRight(change))).pipe(
      // The transaction's own begin and commit; the change's errors are its own.
      Effect.catchIf((e): e is SqlError => e instanceof SqlError, (e) => Effect.fail(failed(e)))
    )
})

/**
 * A fleet node's memory store for a process that is not its daemon (a `worker run`'s briefing,
 * `roster memory`): it connects to the fleet's database on first use, not when the process starts,
 * so a command that never reads memory never waits for the database.
 */
export const fleetMemoryStoreOnDemand = Layer.scoped(
  MemoryStore,
  Effect.gen(function*() {
    const connected = yield* FleetSqlOnDemand
    const sql = Effect.map(
      Effect.mapError(connected, (e) => new MemoryError({ file: WHERE, detail: e.detail, fix: e.fix })),
      (c) => c.sql
    )
    const log: MemoryLog = {
      read: (worker) => Effect.flatMap(sql, (c) => fleetMemoryLog(c).read(worker)),
      append: (worker, events) => Effect.flatMap(sql, (c) => fleetMemoryLog(c).append(worker, events)),
      exclusive: (worker, change) => Effect.flatMap(sql, (c) => fleetMemoryLog(c).exclusive(worker, change))
    }
    return memoryStoreOver(log)
  })
)
