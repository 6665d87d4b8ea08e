import { SqlError } from "@effect/sql/SqlError"
import { SqlClient } from "@effect/sql/SqlClient"
import { Clock, Context, Effect, Layer, Queue, Ref, Schema } from "effect"
import { answerWithin } from "../contract/answerWithin.js"
import * as crypto from "node:crypto"
import { captureHostFiles } from "../config/Paths.js"
import { Files } from "../fs/Files.js"
import { appendJournalLines } from "../journal/journal.js"
import { NoSuchTask, TaskRecord, TaskStoreError } from "../task/TaskRecord.js"
import { type NewTask, TaskStore, type TaskStoreEnv } from "../task/TaskStore.js"
import { newTaskRecord } from "../task/newRecord.js"
import { writeTasksView } from "../task/view.js"

import { LIVE_BOX_ROW } from "./boxRows.js"
import { TASKS_CHANNEL } from "./channels.js"
import { sqlDetail } from "./sqlDetail.js"

const decode = Schema.decodeUnknown(TaskRecord)
const encode = Schema.encode(TaskRecord)

const isUniqueViolation = (e: SqlError) => (e.cause as { readonly code?: string } | undefined)?.code === "23505"


const storeError = (where: string) => (e: SqlError) =>
  new TaskStoreError({ file: `in the fleet's database ${where}`, detail: sqlDetail(e), fix: "check that the database answers: roster doctor" })

/** How long a read of the queue waits for the database before it gives the queue as last seen. */
const READ_WAIT = "3 seconds"

/**
 * The store's reads. While the database does not answer they give the queue as last seen (said
 * once): the node's status and its running boxes go on, and nothing new is claimed or queued.
 */
const makeReads = (sql: SqlClient) =>
  Effect.gen(function*() {
    const rows = (q: Effect.Effect<ReadonlyArray<{ readonly record: unknown }>, SqlError>) =>
      q.pipe(Effect.flatMap((rs) => Effect.forEach(rs, (r) => decode(r.record).pipe(Effect.orDie))))
    const lastSeen = yield* Ref.make<{ readonly tasks: ReadonlyArray<TaskRecord>; readonly down: boolean }>({ tasks: [], down: false })
    // A database whose packets are dropped never answers: after a few seconds the read is taken for down.
    const seen = <A>(read: Effect.Effect<A, SqlError>, stale: (tasks: ReadonlyArray<TaskRecord>) => A) =>
      read.pipe(
        answerWithin(READ_WAIT, () => new SqlError({ cause: new Error(`no answer within ${READ_WAIT}`), message: `no answer within ${READ_WAIT}` })),
        Effect.tap(() => Ref.update(lastSeen, (l) => (l.down ? { ...l, down: false } : l))),
        Effect.catchAll((e) =>
          Ref.getAndUpdate(lastSeen, (l) => ({ ...l, down: true })).pipe(
            Effect.tap((l) => (l.down ? Effect.void : Effect.logWarning(`fleet: the task queue cannot be read (${sqlDetail(e)}); showing it as last seen`))),
            Effect.map((l) => stale(l.tasks))
          ))
      )
    // The queue as this node last read it, each task with its row's version: a read fetches and
    // decodes only the rows that changed since (a node passes the queue at every change anywhere in
    // the fleet; reading every record each time made a long queue cost quadratic time).
    const mirror = new Map<string, { readonly version: string; readonly task: TaskRecord }>()
    const readAll = Effect.gen(function*() {
      const heads = yield* sql<{ readonly task_id: string; readonly version: string }>`SELECT task_id, version::text AS version FROM roster_tasks`
      const stale = heads.filter((h) => mirror.get(h.task_id)?.version !== h.version).map((h) => h.task_id)
      if (stale.length > 0) {
        const changed = yield* sql<{ readonly task_id: string; readonly version: string; readonly record: unknown }>`
          SELECT task_id, version::text AS version, record FROM roster_tasks WHERE task_id IN ${sql.in(stale)}`
        for (const r of changed) mirror.set(r.task_id, { version: r.version, task: yield* decode(r.record).pipe(Effect.orDie) })
      }
      const present = new Set(heads.map((h) => h.task_id))
      for (const id of mirror.keys()) if (!present.has(id)) mirror.delete(id)
      return [...mirror.values()].map((m) => m.task).sort((a, b) => a.seq - b.seq || (a.task_id < b.task_id ? -1 : a.task_id > b.task_id ? 1 : 0))
    })
    const list = seen(readAll.pipe(Effect.tap((tasks) => Ref.set(lastSeen, { tasks, down: false }))), (tasks) => tasks)
    const fetch = (taskId: string) => rows(sql`SELECT record FROM roster_tasks WHERE task_id = ${taskId}`).pipe(Effect.map((r) => r[0]))
    const get = (taskId: string) => seen(fetch(taskId), (tasks) => tasks.find((t) => t.task_id === taskId))
    return { fetch, get, list, rows }
  })

/**
 * The store's writes: a new row, and a change of one row under its lock (a claim stamped with
 * this node and its attempt). A claim by an instance of this node the fleet has fenced is lost:
 * a node resumed after it was declared lost takes nothing before it has joined again.
 */
const writes = (
  sql: SqlClient,
  rows: Effect.Effect.Success<ReturnType<typeof makeReads>>["rows"],
  node: string,
  instance: Effect.Effect<string | null>
) => {
  const now = Clock.currentTimeMillis.pipe(Effect.map((ms) => new Date(ms).toISOString()))
  const insert = (t: NewTask) =>
    Effect.gen(function*() {
      const time = yield* now
      const next = yield* sql<{ readonly seq: string }>`SELECT nextval('roster_task_seq')::text AS seq`
      const task = newTaskRecord(t, `t-${crypto.randomBytes(4).toString("hex")}`, Number(next[0]?.seq), time)
      const record = yield* encode(task).pipe(Effect.orDie)
      yield* sql`INSERT INTO roster_tasks (task_id, worker, seq, status, record, after_id)
        VALUES (${task.task_id}, ${task.worker}, ${task.seq}, ${task.status}, ${JSON.stringify(record)}::jsonb, ${task.after})`
      return task
    })

  const change = (taskId: string, f: (task: TaskRecord, now: string) => TaskRecord) =>
    sql.withTransaction(Effect.gen(function*() {
      const found = yield* rows(sql`SELECT record FROM roster_tasks WHERE task_id = ${taskId} FOR UPDATE`)
      const current = found[0]
      if (!current) return yield* new NoSuchTask({ taskId })
      if (current.unreadable) return { current, next: current }
      const time = yield* now
      const next = f(current, time)
      if (next === current) return { current, next }
      const claiming = next.status === "running" && current.status !== "running"
      if (claiming && (yield* fencedHere(sql, node, instance))) return { current, next: current }
      const attempt = (current.attempt ?? 0) + (claiming ? 1 : 0)
      const stamped: TaskRecord = { ...next, updated_at: time, ...(claiming ? { node, attempt } : {}) }
      const record = yield* encode(stamped).pipe(Effect.orDie)
      yield* sql`UPDATE roster_tasks SET status = ${stamped.status}, record = ${JSON.stringify(record)}::jsonb,
          node = ${stamped.node ?? null}, attempt = ${attempt}, updated_at = now(), version = version + 1
        WHERE task_id = ${taskId}`
      return { current, next: stamped }
    }))
  /**
   * The next runnable task, claimed in one statement: the first queued task by seq whose worker
   * runs nothing anywhere in the fleet — no running task, no live box row (a chat session's) —
   * nor here (`busy`), whose `after` is done, and whose
   * continuation has its run to resume — locked with SKIP LOCKED, so a node that holds a row
   * (stuck, stopped) is stepped over, never waited for. The row is stamped running with this
   * node, the next attempt and `runId`; none when nothing is runnable, or this instance is fenced.
   * Two nodes claiming two tasks of one worker at once: the unique index on running rows refuses
   * the second, and that claim is none (its node passes again at the next change).
   */
  const claimNext = (busy: ReadonlyArray<string>, runId: string, instanceId: string | null) =>
    Effect.gen(function*() {
      const time = yield* now
      const claimed = yield* sql<{ readonly record: unknown }>`
        WITH claimed AS (UPDATE roster_tasks t SET status = 'running', node = ${node}, attempt = t.attempt + 1, updated_at = now(), version = t.version + 1,
          record = t.record || jsonb_build_object(
            'status', 'running', 'reason', NULL::text, 'started_at', ${time}::text, 'updated_at', ${time}::text,
            'run_ids', coalesce(t.record->'run_ids', '[]'::jsonb) || to_jsonb(${runId}::text), 'node', ${node}::text, 'attempt', t.attempt + 1)
        WHERE t.task_id = (
          SELECT q.task_id FROM roster_tasks q
          WHERE q.status = 'queued'
            AND (q.record->>'not_before' IS NULL OR (q.record->>'not_before')::timestamptz <= ${time}::timestamptz)
            AND NOT (q.worker = ANY(${`{${busy.join(",")}}`}::text[]))
            AND NOT EXISTS (SELECT 1 FROM roster_tasks r WHERE r.worker = q.worker AND r.status = 'running')
            AND NOT EXISTS (SELECT 1 FROM roster_boxes b WHERE b.worker = q.worker AND ${sql.literal(LIVE_BOX_ROW)})
            AND (q.after_id IS NULL OR EXISTS (SELECT 1 FROM roster_tasks a WHERE a.task_id = q.after_id AND a.status = 'done'))
            AND (q.record->'continues' IS NULL OR q.record->'continues' = 'null'::jsonb
              OR (q.record->'continues'->>'task_id' = q.task_id)
              OR EXISTS (SELECT 1 FROM roster_tasks c WHERE c.task_id = q.record->'continues'->>'task_id' AND c.status IN ('done', 'failed', 'cancelled'))
              OR (q.record->'continues'->>'task_id' IS NULL AND EXISTS (
                SELECT 1 FROM roster_runs u WHERE u.run_id = q.record->'continues'->>'run_id' AND u.finished_at IS NOT NULL)))
            AND NOT EXISTS (SELECT 1 FROM roster_nodes f WHERE f.name = ${node} AND f.instance = ${instanceId} AND f.fenced_at IS NOT NULL)
          ORDER BY q.seq
          FOR UPDATE SKIP LOCKED
          LIMIT 1)
        RETURNING t.task_id, t.record)
        -- The claim announced in the same round trip (the other nodes pass their queues at once).
        SELECT record, pg_notify(${TASKS_CHANNEL}, task_id) FROM claimed`.pipe(
        Effect.catchIf((e) => isUniqueViolation(e), () => Effect.succeed([] as ReadonlyArray<{ readonly record: unknown }>))
      )
      const row = claimed[0]
      return row ? yield* decode(row.record).pipe(Effect.orDie) : undefined
    })

  /** Queued tasks that can never run (what they wait for failed or was cancelled), failed in one statement: found by index, not a read of the table. */
  const failStuck = Effect.gen(function*() {
    const time = yield* now
    return yield* rows(sql`
      UPDATE roster_tasks q SET status = 'failed', updated_at = now(), version = q.version + 1,
        record = q.record || jsonb_build_object('status', 'failed', 'finished_at', ${time}::text, 'updated_at', ${time}::text,
          'reason', 'it waits for task ' || q.after_id || ', which ended ' || a.status)
      FROM roster_tasks a
      WHERE q.status = 'queued' AND q.after_id IS NOT NULL AND a.task_id = q.after_id AND a.status IN ('failed', 'cancelled')
      RETURNING q.record`)
  })
  /**
   * The finished tasks that ended before `before` moved to the archive table in one statement —
   * the same rule as the files' (task/archive.ts): their answer delivered or none owed, and no
   * task that waits or runs still needs them.
   */
  const archive = (before: number) =>
    sql<{ readonly n: string }>`
      WITH moved AS (DELETE FROM roster_tasks t
        WHERE t.status IN ('done', 'failed', 'cancelled') AND t.record->>'finished_at' IS NOT NULL
          AND (t.record->>'finished_at')::timestamptz < ${new Date(before).toISOString()}::timestamptz
          AND NOT (t.record ? 'unreadable')
          AND (t.record->>'reply_to' IS NULL OR t.record->>'reply_to' = 'none' OR (t.record ? 'delivery' AND NOT (t.record->'delivery' ? 'pending')))
          AND NOT EXISTS (SELECT 1 FROM roster_tasks w WHERE w.status NOT IN ('done', 'failed', 'cancelled')
            AND (w.after_id = t.task_id OR w.record->'continues'->>'task_id' = t.task_id))
        RETURNING t.task_id, t.worker, t.seq, t.status, t.record),
      kept AS (INSERT INTO roster_tasks_archive (task_id, worker, seq, status, record)
        SELECT task_id, worker, seq, status, record FROM moved ON CONFLICT (task_id) DO NOTHING RETURNING 1)
      SELECT count(*)::text AS n FROM kept`.pipe(Effect.map((r) => Number(r[0]?.n ?? 0)))
  return { archive, change, claimNext, failStuck, insert }
}

/** A batch's changes grouped by worker, each worker's in the batch's order. */
const byWorker = (batch: ReadonlyArray<TaskRecord>) => {
  const out = new Map<string, Array<TaskRecord>>()
  for (const t of batch) out.set(t.worker, [...(out.get(t.worker) ?? []), t])
  return out
}

const fencedHere = (sql: SqlClient, node: string, instance: Effect.Effect<string | null>) =>
  Effect.gen(function*() {
    const mine = yield* instance
    if (mine === null) return false
    const rows = yield* sql`SELECT 1 FROM roster_nodes WHERE name = ${node} AND instance = ${mine} AND fenced_at IS NOT NULL`
    return rows.length > 0
  })

/**
 * The task store of a fleet's node: the same interface as the data dir's files, over the fleet's
 * database. A change is one transaction on the task's row (`FOR UPDATE`), so two nodes changing
 * one task take turns; claiming a task (queued → running) stamps this node and the next attempt
 * number, and the unique index on running rows refuses a second running task of one worker —
 * such a claim returns the task unchanged, as a claim that lost. Every change is announced on
 * {@link TASKS_CHANNEL}; the journal and the worker's queue view are still this node's files.
 */
export const fleetTaskStore = (node: string, where: string, instance: Effect.Effect<string | null> = Effect.succeed(null)) =>
  Layer.scoped(
    TaskStore,
    Effect.gen(function*() {
      const sql = yield* SqlClient
      const env = Context.add(yield* captureHostFiles, Files, yield* Files)
      const own = <A, E>(effect: Effect.Effect<A, E, TaskStoreEnv>) => Effect.provide(effect, env)
      const fail = storeError(where)

      const { fetch, get, list, rows } = yield* makeReads(sql)

      // The journal and the worker's view follow the record in the background, in order, a batch at
      // a time (a worker's view written once a batch): never on a claim's path, which is the
      // statement and its NOTIFY alone. What is queued when the store closes is written first.
      const pictures = yield* Queue.unbounded<TaskRecord>()
      // A batch's changes, a worker at a time (a few at once): its journal lines in one append, in
      // order, then its view from what waits or runs — its finished tasks (most, over time) never read for it.
      const paint = (batch: ReadonlyArray<TaskRecord>) =>
        Effect.forEach(byWorker(batch), ([worker, changed]) =>
          Effect.gen(function*() {
            yield* own(appendJournalLines(worker, changed.map((task) => ({
              kind: "task" as const, task_id: task.task_id, status: task.status, run_id: task.run_ids.at(-1) ?? null, reason: task.reason
            }))))
            yield* rows(sql`SELECT record FROM roster_tasks WHERE worker = ${worker} AND status NOT IN ('done', 'failed', 'cancelled') ORDER BY seq`).pipe(
              Effect.flatMap((mine) => own(writeTasksView(worker, mine))),
              Effect.catchAllCause((c) => Effect.logWarning(`the task view of ${worker} could not be written`, c))
            )
          }), { concurrency: 4, discard: true })
      yield* Effect.forkScoped(Queue.takeBetween(pictures, 1, 500).pipe(Effect.flatMap((b) => paint([...b])), Effect.forever))
      yield* Effect.addFinalizer(() => Queue.takeAll(pictures).pipe(Effect.flatMap((b) => paint([...b]))))
      const announce = (task: TaskRecord) =>
        sql`SELECT pg_notify(${TASKS_CHANNEL}, ${task.task_id})`.pipe(Effect.ignore, Effect.zipRight(Queue.offer(pictures, task)), Effect.asVoid)

      const { archive, change, claimNext, failStuck, insert } = writes(sql, rows, node, instance)

      return {
        get: (taskId) => get(taskId),
        list,
        archive: (before) => archive(before).pipe(Effect.mapError(fail)),
        getArchived: (taskId) =>
          rows(sql`SELECT record FROM roster_tasks_archive WHERE task_id = ${taskId}`).pipe(
            Effect.map((r) => (r[0] ? { ...r[0], archived: true } : undefined)),
            Effect.mapError(fail)
          ),
        listArchived: rows(sql`SELECT record FROM roster_tasks_archive ORDER BY seq`).pipe(
          Effect.map((ts) => ts.map((t) => ({ ...t, archived: true }))),
          Effect.mapError(fail)
        ),
        claimNext: ({ busy, runId }) =>
          Effect.flatMap(instance, (mine) => claimNext(busy, runId, mine)).pipe(
            // Notified by the statement itself: only the journal and the view are left to follow it.
            Effect.tap((t) => (t ? Queue.offer(pictures, t) : Effect.void)),
            Effect.mapError(fail)
          ),
        undelivered: rows(sql`SELECT record FROM roster_tasks
          WHERE status IN ('done', 'failed', 'cancelled') AND record->>'reply_to' IS NOT NULL AND record->>'reply_to' <> 'none' AND NOT (record ? 'delivery')
          ORDER BY seq`).pipe(Effect.mapError(fail)),
        failStuck: failStuck.pipe(Effect.tap((ts) => Effect.forEach(ts, announce, { discard: true })), Effect.mapError(fail)),
        add: (t) =>
          insert(t).pipe(
            Effect.tap(announce),
            // Its key is in use by a task that waits or runs: that task is the answer (a twin is never queued).
            Effect.catchIf((e) => t.key !== undefined && isUniqueViolation(e), () =>
              rows(sql`SELECT record FROM roster_tasks WHERE record->>'key' = ${t.key ?? ""} AND status IN ('queued', 'held', 'running')`).pipe(
                Effect.flatMap((found) => (found[0] ? Effect.succeed({ ...found[0], existed: true }) : insert(t)))
              )),
            Effect.mapError(fail)
          ),
        addAll: (ts, admit) =>
          sql.withTransaction(Effect.gen(function*() {
            // One writer of new tasks at a time across the fleet, so a cap `admit` checks cannot be squeezed past by two nodes.
            yield* sql`LOCK TABLE roster_tasks IN SHARE ROW EXCLUSIVE MODE`
            const refused = admit(yield* list)
            if (refused) return yield* Effect.fail(refused)
            return yield* Effect.forEach(ts, insert)
          })).pipe(
            Effect.tap((added) => Effect.forEach(added, announce, { discard: true })),
            Effect.catchTag("SqlError", (e) => Effect.fail(fail(e)))
          ),
        update: (taskId, f) =>
          change(taskId, f).pipe(
            Effect.tap(({ current, next }) => (next !== current && next.status !== current.status ? announce(next) : Effect.void)),
            Effect.map(({ next }) => next),
            // Another task of this worker runs somewhere in the fleet: this claim lost, the task is as it was.
            Effect.catchTag("SqlError", (e): Effect.Effect<TaskRecord, NoSuchTask | TaskStoreError> =>
              isUniqueViolation(e)
                ? fetch(taskId).pipe(
                  Effect.catchAll((e2) => Effect.fail(fail(e2))),
                  Effect.flatMap((t) => (t ? Effect.succeed(t) : Effect.fail(new NoSuchTask({ taskId }))))
                )
                : Effect.fail(fail(e)))
          )
      }
    })
  )
