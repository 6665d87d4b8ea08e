import type { SqlError } from "@effect/sql/SqlError"
import { SqlClient } from "@effect/sql/SqlClient"
import { Clock, Effect, Schema } from "effect"
import type { ClusterSection } from "../config/cluster.js"
import { TaskRecord } from "../task/TaskRecord.js"
import { fenceAfterS } from "./lease.js"
import { TASKS_CHANNEL } from "./channels.js"

const decode = Schema.decodeUnknown(TaskRecord)
const encode = Schema.encode(TaskRecord)

/** A node instance the fleet gave up on, and what became of the tasks it was running. */
export interface FencedNode {
  readonly node: string
  readonly instance: string
  readonly tasks: ReadonlyArray<{ readonly taskId: string; readonly worker: string; readonly status: TaskRecord["status"] }>
}

/**
 * What a lost node's running task becomes. Its attempt is recorded as lost either way; then a
 * cancel asked of it wins, a first loss under `on_node_loss = "retry"` queues it again (its next
 * claim is a new attempt, on whichever node takes it), and anything else fails — handed to the
 * fencing node, which then owes its answer's delivery.
 */
export const afterLoss = (t: TaskRecord, lostNode: string, by: string, onLoss: ClusterSection["on_node_loss"], now: string): TaskRecord => {
  const attempt = t.attempt ?? 0
  const runId = t.run_ids.at(-1) ?? null
  const lost = [...(t.lost ?? []), { node: lostNode, attempt, run_id: runId, at: now, by }]
  const what = `node ${lostNode} was lost while it ran attempt ${attempt}${runId ? ` (run ${runId})` : ""}`
  if (t.cancel_requested) {
    return { ...t, status: "cancelled", reason: `cancelled by a person (roster task cancel); ${what} before it stopped the box`, finished_at: now, ended_by: "fenced", exit_code: null, node: by, lost }
  }
  if (onLoss === "retry" && (t.lost ?? []).length === 0) {
    const { node: _node, ...rest } = t
    return { ...rest, status: "queued", reason: `${what}; queued again for another node (a task is re-run once: [cluster] on_node_loss)`, started_at: null, lost }
  }
  const why = onLoss === "fail" ? `[cluster] on_node_loss is "fail"` : "it had been re-run once already after a lost node"
  return { ...t, status: "failed", reason: `${what}; ${why} — queue it again: roster task add`, finished_at: now, ended_by: "fenced", exit_code: null, node: by, lost }
}

/**
 * Fences one instance of a node that went silent, if it still is: marked fenced (nothing its runs
 * do can land after this commits — every landing holds a share lock on the node's row, which
 * this waits for, and checks the mark), then each task it was running becomes what
 * {@link afterLoss} says, announced to every node. A landing in progress (a lock this cannot get
 * within 2 s) leaves it for the next beat. Returns what it fenced, or nothing. Another node fences
 * one silent past the lease and its margin; a node fences its own instance once its lease lapsed.
 */
export const fenceNode = (
  lost: { readonly name: string; readonly instance: string },
  cluster: ClusterSection,
  by: string,
  silentForS: number = fenceAfterS(cluster)
) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient
    return yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql`SELECT set_config('lock_timeout', '2000', true)`
      const held = yield* sql`SELECT name FROM roster_nodes
        WHERE name = ${lost.name} AND instance = ${lost.instance} AND fenced_at IS NULL AND left_at IS NULL
          AND heartbeat_at < now() - make_interval(secs => ${silentForS})
        FOR UPDATE`
      if (held.length === 0) return undefined
      yield* sql`UPDATE roster_nodes SET fenced_at = now(), fenced_by = ${by} WHERE name = ${lost.name} AND instance = ${lost.instance}`
      const running = yield* sql<{ readonly record: unknown }>`SELECT record FROM roster_tasks
        WHERE status = 'running' AND node = ${lost.name} ORDER BY seq FOR UPDATE`
      const now = new Date(yield* Clock.currentTimeMillis).toISOString()
      const tasks: Array<FencedNode["tasks"][number]> = []
      for (const row of running) {
        const t = yield* decode(row.record).pipe(Effect.orDie)
        const next = { ...afterLoss(t, lost.name, by, cluster.on_node_loss, now), updated_at: now }
        const record = yield* encode(next).pipe(Effect.orDie)
        yield* sql`UPDATE roster_tasks SET status = ${next.status}, node = ${next.node ?? null}, record = ${JSON.stringify(record)}::jsonb,
            updated_at = now(), version = version + 1 WHERE task_id = ${t.task_id}`
        yield* sql`SELECT pg_notify(${TASKS_CHANNEL}, ${t.task_id})`
        tasks.push({ taskId: t.task_id, worker: t.worker, status: next.status })
      }
      return { node: lost.name, instance: lost.instance, tasks } satisfies FencedNode
    }))
  })

/** A lock another transaction held past `lock_timeout`: a landing in progress, to be tried again later. */
export const isLockTimeout = (e: SqlError) => (e.cause as { readonly code?: string } | undefined)?.code === "55P03"

/**
 * One sweep for lost nodes, by `by` (a live node): every instance silent past `node_timeout_s`
 * and the lease's margin (by then it has stopped its own boxes, if it runs at all), neither left
 * nor fenced, is fenced. Any node may sweep; the row locks make each fencing once.
 */
export const fenceLostNodes = (cluster: ClusterSection, by: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient
    const silent = yield* sql<{ readonly name: string; readonly instance: string }>`SELECT name, instance FROM roster_nodes
      WHERE left_at IS NULL AND fenced_at IS NULL AND name <> ${by}
        AND heartbeat_at < now() - make_interval(secs => ${fenceAfterS(cluster)})`
    const fenced: Array<FencedNode> = []
    for (const n of silent) {
      const done = yield* fenceNode(n, cluster, by).pipe(
        Effect.catchIf(isLockTimeout, () => Effect.logInfo(`fleet: node ${n.name} is silent but a landing of its is still open; fenced at the next beat`))
      )
      if (done) fenced.push(done)
    }
    return fenced
  })
