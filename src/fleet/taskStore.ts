import { SqlError } from "@effect/sql/SqlError"
import { SqlClient } from "@effect/sql/SqlClient"
import { Clock, Effect, Fiber, Layer, Queue, Ref, Schema } from "effect"
import { answerWithin } from "../contract/answerWithin.js"
import * as crypto from "node:crypto"
import { journalIn } from "../journal/journal.js"
import { taskPlace } from "../task/place.js"
import { isFinal, NoSuchTask, TaskRecord, TaskStoreError } from "../task/TaskRecord.js"
import { type NewTask, TaskStore } from "../task/TaskStore.js"
import { newTaskRecord } from "../task/newRecord.js"
import { viewEntry, ViewEntry, viewIn } from "../task/view.js"

import { TASKS_CHANNEL } from "./channels.js"
import { sqlDetail } from "./sqlDetail.js"

const decode = Schema.decodeUnknown(TaskRecord)
const encode = Schema.encode(TaskRecord)

const decodeView = Schema.decodeUnknown(Schema.Array(ViewEntry))

/**
 * A change to paint: the task, and its worker's view as its statement found it (before the
 * change) when it gave one — decoded only by the paint, and only the last of a worker's in a batch.
 */
interface Picture {
  readonly task: TaskRecord
  readonly viewBefore?: unknown
}

/** The view a statement found, with its own change put in: none when the task was not in it and now waits (its place unknown). */
const viewAfter = (before: ReadonlyArray<ViewEntry>, task: TaskRecord): ReadonlyArray<ViewEntry> | undefined => {
  const at = before.findIndex((e) => e.task_id === task.task_id)
  if (isFinal(task.status)) return at < 0 ? before : before.filter((_, i) => i !== at)
  return at < 0 ? undefined : before.map((e, i) => (i === at ? viewEntry(task) : e))
}

/** The view a statement gave back, after `task`'s change; none if it gave none or it does not read (an unreadable task of the worker): the paint then reads it. */
const viewOf = ({ task, viewBefore }: Picture) =>
  viewBefore === undefined
    ? Effect.succeed(undefined)
    // A view that does not read is none: the paint then reads the worker's tasks itself (see above).
    : decodeView(viewBefore).pipe(Effect.map((before) => viewAfter(before, task)), Effect.orElseSucceed(() => undefined))

const isUniqueViolation = (e: SqlError) => (e.cause as { readonly code?: string } | undefined)?.code === "23505"


const storeError = (where: string) => (e: SqlError) =>
  new TaskStoreError({ file: `in the fleet's database ${where}`, detail: sqlDetail(e), fix: "check that the database answers: roster doctor" })

/** How many of its tasks' last writes a node keeps (those it has in hand: a few, but bounded). */
const KEPT_WRITES = 1000

/** How long a paint of the journals and views waits for more changes to paint with its first. */
const PAINT_GATHER = "20 millis"

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

  // What this node last wrote of the tasks it has in hand (claimed, running): the next change of
  // one starts from it, unread, and a row someone else wrote since is read when the write misses.
  const lastWritten = new Map<string, { readonly version: string; readonly task: TaskRecord }>()
  const remember = (task: TaskRecord, version: string) => {
    lastWritten.delete(task.task_id)
    if (isFinal(task.status)) return
    lastWritten.set(task.task_id, { version, task })
    if (lastWritten.size > KEPT_WRITES) lastWritten.delete(lastWritten.keys().next().value!)
  }
  const read = (taskId: string) =>
    sql<{ readonly record: unknown; readonly version: string }>`SELECT record, version::text AS version FROM roster_tasks WHERE task_id = ${taskId}`.pipe(
      Effect.flatMap((found) =>
        found[0] ? Effect.map(decode(found[0].record).pipe(Effect.orDie), (task) => ({ version: found[0]!.version, task })) : Effect.succeed(undefined)
      )
    )

  /**
   * A change of one task: its row (as this node last wrote it, or read) with its version, `f`
   * applied, and the row written only if no one wrote it since (else read again and `f` again) —
   * one or two round trips and no lock held while `f` runs, where a transaction holding the row
   * took five. A claim (queued → running) is written only while this instance is not fenced, in
   * the same statement, and announced by it. An answer is never given from memory alone: what
   * `f` leaves unchanged there is read again.
   */
  const change = (taskId: string, f: (task: TaskRecord, now: string) => TaskRecord) =>
    Effect.gen(function*() {
      let known = lastWritten.get(taskId)
      for (;;) {
        const fromMemory = known !== undefined
        const row = known ?? (yield* read(taskId))
        known = undefined
        if (!row) return yield* new NoSuchTask({ taskId })
        const current = row.task
        const time = yield* now
        const next = current.unreadable ? current : f(current, time)
        if (next === current) {
          if (fromMemory) continue
          return { current, next, viewBefore: undefined }
        }
        const claiming = next.status === "running" && current.status !== "running"
        const mine = claiming ? yield* instance : null
        const attempt = (current.attempt ?? 0) + (claiming ? 1 : 0)
        const stamped: TaskRecord = { ...next, updated_at: time, ...(claiming ? { node, attempt } : {}) }
        const record = yield* encode(stamped).pipe(Effect.orDie)
        const moved = stamped.status !== current.status
        // A change of status is announced, and its worker's view comes back with it, by the write itself.
        const written = yield* sql<{ readonly view: unknown; readonly version: string }>`
          SELECT o_version AS version, o_view AS view FROM roster_write_task(${taskId}, ${row.version}::bigint, ${stamped.status},
            ${JSON.stringify(record)}::jsonb, ${stamped.node ?? null}, ${attempt}, ${node}, ${mine}, ${moved})`
        const done = written[0]
        if (done) {
          remember(stamped, done.version)
          return { current, next: stamped, viewBefore: moved ? done.view : undefined }
        }
        // Not written: another wrote the row first (its change is the one `f` now sees), or this
        // instance is fenced (a claim that lost).
        if (claiming && !fromMemory && (yield* fencedHere(sql, node, mine))) return { current, next: current, viewBefore: undefined }
      }
    })
  /**
   * The next runnable task, claimed in one call of `roster_claim_next` (taskFunctions.ts, where
   * the rule is: the first queued task by seq whose worker runs nothing anywhere in the fleet nor
   * here (`busy`), SKIP LOCKED); none when nothing is runnable, or this instance is fenced.
   * Two nodes claiming two tasks of one worker at once: the unique index on running rows refuses
   * the second, and that claim is none (its node passes again at the next change).
   */
  const claimNext = (busy: ReadonlyArray<string>, runId: string, instanceId: string | null) =>
    Effect.gen(function*() {
      const time = yield* now
      const claimed = yield* sql<{ readonly record: unknown; readonly version: string; readonly view: unknown }>`
        SELECT o_record AS record, o_version AS version, o_view AS view
        FROM roster_claim_next(${node}, ${`{${busy.join(",")}}`}::text[], ${runId}, ${instanceId}, ${time})`.pipe(
        Effect.catchIf((e) => isUniqueViolation(e), () => Effect.succeed([] as ReadonlyArray<{ readonly record: unknown; readonly version: string; readonly view: unknown }>))
      )
      const row = claimed[0]
      if (!row) return undefined
      const task = yield* decode(row.record).pipe(Effect.orDie)
      remember(task, row.version)
      return { task, viewBefore: row.view } satisfies Picture
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
const byWorker = (batch: ReadonlyArray<Picture>) => {
  const out = new Map<string, Array<Picture>>()
  for (const p of batch) out.set(p.task.worker, [...(out.get(p.task.worker) ?? []), p])
  return out
}

const fencedHere = (sql: SqlClient, node: string, mine: string | null) =>
  mine === null
    ? Effect.succeed(false)
    : sql`SELECT 1 FROM roster_nodes WHERE name = ${node} AND instance = ${mine} AND fenced_at IS NOT NULL`.pipe(Effect.map((rows) => rows.length > 0))

/**
 * The task store of a fleet's node: the same interface as the data dir's files, over the fleet's
 * database. A change is written only over the version it was made from (two nodes changing one
 * task: the second reads the first's and makes its change again); claiming a task (queued → running) stamps this node and the next attempt
 * number, and the unique index on running rows refuses a second running task of one worker —
 * such a claim returns the task unchanged, as a claim that lost. Every change is announced on
 * {@link TASKS_CHANNEL}; the journal and the worker's queue view are still this node's files.
 */
export const fleetTaskStore = (node: string, where: string, instance: Effect.Effect<string | null> = Effect.succeed(null)) =>
  Layer.scoped(
    TaskStore,
    Effect.gen(function*() {
      const sql = yield* SqlClient
      const place = yield* taskPlace
      const { appendJournalLines } = journalIn(place)
      const { writeTasksView, writeViewEntries } = viewIn(place)
      const fail = storeError(where)

      const { fetch, get, list, rows } = yield* makeReads(sql)

      // The journal and the worker's view follow the record in the background, in order, a batch at
      // a time (a worker's view written once a batch): never on a claim's path, which is the
      // statement and its NOTIFY alone. What is queued when the store closes is written first.
      const pictures = yield* Queue.unbounded<Picture>()
      // A batch's changes, a worker at a time (a few at once): its journal lines in one append, in
      // order, then its view from what waits or runs — its finished tasks (most, over time) never read for it.
      // The view is the one the batch's last change came back with, read only when it came with none.
      const paint = (batch: ReadonlyArray<Picture>) =>
        Effect.forEach(byWorker(batch), ([worker, changed]) =>
          Effect.gen(function*() {
            yield* appendJournalLines(worker, changed.map(({ task }) => ({
              kind: "task" as const, task_id: task.task_id, status: task.status, run_id: task.run_ids.at(-1) ?? null, reason: task.reason
            })))
            const given = yield* viewOf(changed.at(-1)!)
            yield* (given
              ? writeViewEntries(worker, given)
              : rows(sql`SELECT record FROM roster_tasks WHERE worker = ${worker} AND status NOT IN ('done', 'failed', 'cancelled') ORDER BY seq`).pipe(
                Effect.flatMap((mine) => writeTasksView(worker, mine))
              )).pipe(Effect.catchAllCause((c) => Effect.logWarning(`the task view of ${worker} could not be written`, c)))
          }), { concurrency: 4, discard: true })
      // A batch gathers for a moment after its first change: a task claimed and ended at once (or
      // two of one worker's) is one paint of its worker, not two.
      // What the painter has taken is painted even when the store closes meanwhile (the close waits
      // for it), and before what is left in the queue: a view is never painted over by an older one.
      const painter = yield* Effect.forkScoped(Effect.forever(Effect.uninterruptibleMask((restore) =>
        restore(Queue.take(pictures)).pipe(
          Effect.zipLeft(Effect.sleep(PAINT_GATHER)),
          Effect.flatMap((first) => Effect.map(Queue.takeAll(pictures), (rest) => [first, ...rest])),
          Effect.flatMap(paint)
        ))))
      yield* Effect.addFinalizer(() =>
        Fiber.interrupt(painter).pipe(Effect.zipRight(Queue.takeAll(pictures)), Effect.flatMap((b) => paint([...b]))))
      const announce = (task: TaskRecord) =>
        // A wake-up not sent is a later one: every node's dispatch loop also looks every 2 s.
        sql`SELECT pg_notify(${TASKS_CHANNEL}, ${task.task_id})`.pipe(Effect.ignore, Effect.zipRight(Queue.offer(pictures, { task })), Effect.asVoid)

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
            Effect.tap((claimed) => (claimed ? Queue.offer(pictures, claimed) : Effect.void)),
            Effect.map((claimed) => claimed?.task),
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
              rows(sql`SELECT record FROM roster_tasks
                WHERE worker = ${t.worker} AND record->>'key' = ${t.key ?? ""} AND status IN ('queued', 'held', 'running')`).pipe(
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
            // Announced by its own statement: only the journal and the view are left to follow it.
            Effect.tap(({ current, next, viewBefore }) => (next !== current && next.status !== current.status ? Queue.offer(pictures, { task: next, viewBefore }) : Effect.void)),
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
