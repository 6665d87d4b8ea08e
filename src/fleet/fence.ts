import { SqlClient } from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { Effect, Layer } from "effect"
import { Fenced, type FencedRun, RunFence } from "../run/RunFence.js"
import { sqlDetail } from "./sqlDetail.js"

/**
 * A fleet node's fence: a run's work lands inside one transaction that first takes a key-share
 * lock on this node's row — still this instance, not fenced — and, for a task's run, on the
 * task's row — still this node's, this run its current attempt. The fencing of a lost node
 * takes those rows for update, so it waits for a landing under way and every later one sees
 * the mark. Writes to the fleet's database inside `land` (tasks, memory) are in the same
 * transaction; other effects (a git push on the shared folder) happen while the lock is held.
 * A node frozen mid-landing is let go by the database after `[cluster] node_timeout_s` idle in
 * the transaction, so it cannot hold its own fencing off for ever.
 */
export const fleetRunFence = (node: string, instance: Effect.Effect<string>, timeoutS: number, cutOff: Effect.Effect<boolean>) =>
  Layer.effect(
    RunFence,
    Effect.gen(function*() {
      const sql = yield* SqlClient
      const check = (runId: string, taskId: string | null) =>
        Effect.gen(function*() {
          yield* sql`SELECT set_config('idle_in_transaction_session_timeout', ${String(timeoutS * 1000)}, true)`
          // The lease by the database's clock: a node whose last beat is older than node_timeout_s is LOST to the
          // fleet already, and its right to land ends with its lease — not when another node gets round to fencing it
          // (a node thawed from a freeze in between would otherwise land work whose task then runs again elsewhere).
          const me = yield* sql<{ readonly fenced: boolean; readonly leased: boolean }>`SELECT fenced_at IS NOT NULL AS fenced,
              heartbeat_at > now() - make_interval(secs => ${timeoutS}) AS leased
            FROM roster_nodes WHERE name = ${node} AND instance = ${yield* instance} AND left_at IS NULL FOR KEY SHARE`.withoutTransform
          if (me.length === 0 || me[0]!.fenced) {
            return yield* new Fenced({
              runId,
              detail: `node ${node} was declared lost by the fleet (silent past [cluster] node_timeout_s) and its attempts fenced; ` +
                "its tasks went back to the queue"
            })
          }
          if (!me[0]!.leased) {
            return yield* new Fenced({
              runId,
              detail: `node ${node}'s lease has expired (no heartbeat within [cluster] node_timeout_s = ${timeoutS} s by the database's clock): ` +
                "the fleet counts it lost and may re-run its tasks elsewhere, so it lands nothing until it beats again"
            })
          }
          if (taskId === null) return
          const task = yield* sql`SELECT 1 FROM roster_tasks
            WHERE task_id = ${taskId} AND node = ${node} AND record->'run_ids'->>-1 = ${runId} FOR KEY SHARE`
          if (task.length === 0) {
            return yield* new Fenced({ runId, detail: `task ${taskId} is no longer this run's: another attempt of it runs or ran (roster task show ${taskId})` })
          }
        })
      const guard = <A, E, R>(run: FencedRun, land: Effect.Effect<A, E, R>): Effect.Effect<A, E | Fenced, R> =>
        sql.withTransaction(check(run.runId, run.taskId).pipe(Effect.zipRight(land))).pipe(
          Effect.mapError((e) =>
            e instanceof SqlError
              ? new Fenced({ runId: run.runId, detail: `the fleet's database cannot vouch for it (${sqlDetail(e)}): try again once it answers` })
              : e)
        )
      const standsDown = cutOff.pipe(Effect.map((cut) =>
        cut
          ? `fleet node ${node} is cut off from the fleet's database: its boxes are stopped and may not act until it answers again ` +
            "(the fleet may re-run their tasks elsewhere)"
          : null
      ))
      return { guard, standsDown }
    })
  )
