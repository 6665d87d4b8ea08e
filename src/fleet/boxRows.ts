import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"

/** A row of roster_boxes whose node instance is still the fleet's (not fenced, not left, not replaced by a restart). */
export const LIVE_BOX_ROW = `EXISTS (SELECT 1 FROM roster_nodes n
  WHERE n.name = b.node AND n.instance = b.instance AND n.fenced_at IS NULL AND n.left_at IS NULL)`

/**
 * Takes `worker`'s box row for a box that is not a task's (a chat session's) on this node
 * instance: true when it is this box's now. A stale row (its instance fenced, left or replaced)
 * is taken over. Then, in a statement of its own, a running task of that worker anywhere gives
 * the row back (false): a claim writes its running row and then looks for box rows, this writes
 * its box row and then looks for running tasks — committed in that order, one of the two always
 * sees the other, so a session and a task of one worker never both start.
 */
export const takeBoxRow = (worker: string, node: string, instance: string, runKey: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient
    const taken = yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql.unsafe(`DELETE FROM roster_boxes b WHERE worker = $1 AND NOT ${LIVE_BOX_ROW}`, [worker])
      return yield* sql`INSERT INTO roster_boxes (worker, node, instance, run_key) VALUES (${worker}, ${node}, ${instance}, ${runKey})
        ON CONFLICT (worker) DO NOTHING RETURNING worker`
    }))
    if (taken.length === 0) return false
    const running = yield* sql`SELECT 1 FROM roster_tasks WHERE worker = ${worker} AND status = 'running'`
    if (running.length === 0) return true
    yield* giveBoxRow(worker, runKey)
    return false
  })

/** Gives back the box row `runKey` holds, if it still does. */
export const giveBoxRow = (worker: string, runKey: string) =>
  Effect.flatMap(SqlClient, (sql) => sql`DELETE FROM roster_boxes WHERE worker = ${worker} AND run_key = ${runKey}`).pipe(Effect.asVoid)

/** Whether another box than this node's task holds `worker`'s row, live: a claim that finds one gives its task back. */
export const boxRowElsewhere = (worker: string) =>
  Effect.flatMap(SqlClient, (sql) => sql.unsafe(`SELECT 1 FROM roster_boxes b WHERE worker = $1 AND ${LIVE_BOX_ROW}`, [worker])).pipe(
    Effect.map((rows) => rows.length > 0)
  )
