import type { FileSystem, Path } from "@effect/platform"
import { Clock, Context, Effect, Layer } from "effect"
import * as crypto from "node:crypto"
import { layout, type Paths } from "../config/Paths.js"
import type { Files } from "../fs/Files.js"
import { atomicIn } from "../fs/atomic.js"
import { journalIn } from "../journal/journal.js"
import { type AddedTask, holdsKey, NoSuchTask, type TaskRecord, type TaskRefused, TaskStoreError } from "./TaskRecord.js"
import { archivable, localArchive as archiveIn } from "./archive.js"
import { makeListCache } from "./listCache.js"
import { type NewTask, newTaskRecord } from "./newRecord.js"

export type { NewTask } from "./newRecord.js"
import { taskPlace } from "./place.js"
import { byQueueOrder, makeTaskReader } from "./readTasks.js"
import { viewIn } from "./view.js"

/** What the store's layer reads its files through (taken when it is built): the deployment's folders, the file system, the journal's appends. */
export type TaskStoreEnv = Paths | FileSystem.FileSystem | Path.Path | Files

export { byQueueOrder }

/**
 * The task records under `data/tasks/records`. Every change is an atomic write, then a journal
 * line and a fresh view of the worker's queue. One writer at a time in this process; while the
 * daemon runs it is the only process that writes (the CLI goes through its API).
 */
export class TaskStore extends Context.Tag("roster/TaskStore")<TaskStore, {
  /** Adds a task; one with a key in use by a task that waits or runs gives that task instead (`existed`). */
  readonly add: (task: NewTask) => Effect.Effect<AddedTask, TaskStoreError>
  /**
   * Adds several at once if `admit` (seeing every task, under the store's lock) lets them:
   * a cap checked and filled by one writer, so two callers at once cannot both squeeze past it.
   */
  readonly addAll: (
    tasks: ReadonlyArray<NewTask>,
    admit: (all: ReadonlyArray<TaskRecord>) => TaskRefused | undefined
  ) => Effect.Effect<ReadonlyArray<TaskRecord>, TaskStoreError | TaskRefused>
  readonly get: (taskId: string) => Effect.Effect<TaskRecord | undefined>
  /** Every task, in queue order. */
  readonly list: Effect.Effect<ReadonlyArray<TaskRecord>>
  /**
   * Moves the finished tasks that ended before `before` (ms) and that nothing live needs (see
   * {@link archivable}) out of the live list, into the archive; how many moved.
   */
  readonly archive: (before: number) => Effect.Effect<number, TaskStoreError>
  /** One archived task (`task show` of a task past keep_days), or none. */
  readonly getArchived: (taskId: string) => Effect.Effect<TaskRecord | undefined, TaskStoreError>
  /** Every archived task, in queue order (`task list --all`). */
  readonly listArchived: Effect.Effect<ReadonlyArray<TaskRecord>, TaskStoreError>
  /** Read, change and write one task under the store's lock; `f` returning the record unchanged writes nothing. */
  readonly update: (
    taskId: string,
    f: (task: TaskRecord, now: string) => TaskRecord
  ) => Effect.Effect<TaskRecord, NoSuchTask | TaskStoreError>
  /**
   * A fleet's store: claims the next runnable task in one statement (no read of the queue), for
   * a run `runId`, skipping workers `busy` on this node; none when nothing is runnable now. A
   * machine on its own has none: its dispatch reads its queue (a folder of files) itself.
   */
  readonly claimNext?: (o: { readonly busy: ReadonlyArray<string>; readonly runId: string }) => Effect.Effect<TaskRecord | undefined, TaskStoreError>
  /** A fleet's store: the ended tasks whose answer has somewhere to go and no delivery yet (by index, not a read of the queue). */
  readonly undelivered?: Effect.Effect<ReadonlyArray<TaskRecord>, TaskStoreError>
  /** A fleet's store: fails the queued tasks that can never run (what they wait for failed or was cancelled). */
  readonly failStuck?: Effect.Effect<ReadonlyArray<TaskRecord>, TaskStoreError>
}>() {
  /** Holds the lock, the list cache and the file services it was built with. */
  static readonly layer = Layer.effect(
    TaskStore,
    Effect.gen(function*() {
      const place = yield* taskPlace
      const { fs } = place
      const f = layout(place.paths)
      const { writeJson } = atomicIn(fs, place.path)
      const { appendJournal } = journalIn(place)
      const { writeTasksView } = viewIn(place)
      const localArchive = archiveIn(place)
      const lock = yield* Effect.makeSemaphore(1)
      const now = Clock.currentTimeMillis.pipe(Effect.map((ms) => new Date(ms).toISOString()))
      const { get, readAll } = makeTaskReader(place)
      const { forget, list, remember } = yield* makeListCache(fs, f, readAll)

      const write = (task: TaskRecord) =>
        writeJson(f.taskFile(task.task_id), task).pipe(
          Effect.zipRight(remember(task)),
          Effect.tapError(() => forget),
          Effect.mapError((e) => new TaskStoreError({ file: f.taskFile(task.task_id), detail: e.message }))
        )

      // The journal and the view are the worker's read-only picture; they follow the record and never fail it.
      const announce = (task: TaskRecord) =>
        appendJournal(task.worker, {
          kind: "task",
          task_id: task.task_id,
          status: task.status,
          run_id: task.run_ids.at(-1) ?? null,
          reason: task.reason
        }).pipe(Effect.zipRight(list.pipe(Effect.flatMap((all) => writeTasksView(task.worker, all)))))

      const freshId: Effect.Effect<string> = Effect.gen(function*() {
        const id = `t-${crypto.randomBytes(4).toString("hex")}`
        const taken = yield* Effect.all([fs.exists(f.taskFile(id)), fs.exists(`${f.tasksUnreadableDir}/${id}.json`)]).pipe(
            Effect.map(([a, b]) => a || b),
            // 32 random bits: a folder that cannot be looked in makes a clash no likelier, and the write says what is wrong.
            Effect.orElseSucceed(() => false)
          )
        return taken ? yield* freshId : id
      })

      const addUnlocked = (t: NewTask) =>
          Effect.gen(function*() {
            const all = yield* list
            const time = yield* now
            const task = newTaskRecord(t, yield* freshId, all.reduce((m, x) => Math.max(m, x.seq), 0) + 1, time)
            yield* write(task)
            yield* announce(task)
            return task
          })

      return {
        get,
        list,
        archive: (before) =>
          lock.withPermits(1)(Effect.gen(function*() {
            const leaving = archivable(yield* list, before)
            const moved = yield* localArchive.move(leaving).pipe(Effect.tapError(() => forget))
            if (moved === 0) return 0
            yield* forget
            // The workers' pictures of their queues lose what left it.
            const left = yield* list
            yield* Effect.forEach(new Set(leaving.map((t) => t.worker)), (w) => writeTasksView(w, left), { discard: true })
            return moved
          })),
        getArchived: localArchive.get,
        listArchived: localArchive.list,
        add: (t) =>
          lock.withPermits(1)(Effect.gen(function*() {
            const twin = t.key === undefined ? undefined : (yield* list).find((x) => holdsKey(x, t.worker, t.key) && !x.unreadable)
            return twin ? { ...twin, existed: true } : yield* addUnlocked(t)
          })),
        addAll: (ts, admit) =>
          lock.withPermits(1)(Effect.gen(function*() {
            const refused = admit(yield* list)
            if (refused) return yield* Effect.fail(refused)
            return yield* Effect.forEach(ts, addUnlocked)
          })),
        update: (taskId, change) =>
          lock.withPermits(1)(Effect.gen(function*() {
            const current = yield* get(taskId)
            if (!current) return yield* Effect.fail(new NoSuchTask({ taskId }))
            // A record put aside is never rewritten: what it holds is a person's to read.
            if (current.unreadable) return current
            const time = yield* now
            const next = change(current, time)
            if (next === current) return current
            const stamped = { ...next, updated_at: time }
            yield* write(stamped)
            if (stamped.status !== current.status) yield* announce(stamped)
            return stamped
          }))
      }
    })
  )
}
