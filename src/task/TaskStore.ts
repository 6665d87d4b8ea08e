import { FileSystem, Path } from "@effect/platform"
import { Clock, Context, Effect, Layer, Option, Ref, Schema } from "effect"
import * as crypto from "node:crypto"
import { Paths, layout } from "../config/Paths.js"
import { readJsonOptional, writeJson } from "../fs/atomic.js"
import { Files } from "../fs/Files.js"
import { appendJournal } from "../journal/journal.js"
import { isTaskId, NoSuchTask, type TaskOrigin, TaskRecord, type TaskRefused, TaskStoreError } from "./TaskRecord.js"
import { writeTasksView } from "./view.js"

/** A task to add to the store: who does it, what, with which ceiling, after which task, in which channel, queued by whom. */
export interface NewTask {
  readonly worker: string
  readonly prompt: string
  readonly ceilingMin: number | null
  readonly after: string | null
  readonly channel?: string | undefined
  readonly origin: TaskOrigin
}

/** What the store reads per call: the deployment's folders, the file system, the journal's appends. */
export type TaskStoreEnv = Paths | FileSystem.FileSystem | Path.Path | Files

/** Queue order: by seq, then id (two CLIs adding at once while the daemon is down share a seq). */
export const byQueueOrder = (a: TaskRecord, b: TaskRecord) => a.seq - b.seq || (a.task_id < b.task_id ? -1 : 1)

/**
 * The task records under `data/tasks/records`. Every change is an atomic write, then a journal
 * line and a fresh view of the worker's queue. One writer at a time in this process; while the
 * daemon runs it is the only process that writes (the CLI goes through its API).
 */
export class TaskStore extends Context.Tag("roster/TaskStore")<TaskStore, {
  readonly add: (task: NewTask) => Effect.Effect<TaskRecord, TaskStoreError, TaskStoreEnv>
  /**
   * Adds several at once if `admit` (seeing every task, under the store's lock) lets them:
   * a cap checked and filled by one writer, so two callers at once cannot both squeeze past it.
   */
  readonly addAll: (
    tasks: ReadonlyArray<NewTask>,
    admit: (all: ReadonlyArray<TaskRecord>) => TaskRefused | undefined
  ) => Effect.Effect<ReadonlyArray<TaskRecord>, TaskStoreError | TaskRefused, TaskStoreEnv>
  readonly get: (taskId: string) => Effect.Effect<TaskRecord | undefined, never, TaskStoreEnv>
  /** Every task, in queue order. */
  readonly list: Effect.Effect<ReadonlyArray<TaskRecord>, never, TaskStoreEnv>
  /** Read, change and write one task under the store's lock; `f` returning the record unchanged writes nothing. */
  readonly update: (
    taskId: string,
    f: (task: TaskRecord, now: string) => TaskRecord
  ) => Effect.Effect<TaskRecord, NoSuchTask | TaskStoreError, TaskStoreEnv>
}>() {
  /** Holds only the lock and the list cache (by folder); reads the deployment and files per call. */
  static readonly layer = Layer.effect(
    TaskStore,
    Effect.gen(function*() {
      const lock = yield* Effect.makeSemaphore(1)
      const now = Clock.currentTimeMillis.pipe(Effect.map((ms) => new Date(ms).toISOString()))
      const files = Effect.map(Paths, layout)

      const get = (taskId: string) =>
        isTaskId(taskId)
          ? files.pipe(
            Effect.flatMap((f) => readJsonOptional(f.taskFile(taskId))),
            Effect.map((raw) => Schema.decodeUnknownOption(TaskRecord)(raw)),
            Effect.map((o) => (o._tag === "Some" ? o.value : undefined))
          )
          : Effect.succeed(undefined)

      const readAll = (dir: string) =>
        Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readDirectory(dir)).pipe(
          Effect.orElseSucceed((): ReadonlyArray<string> => []),
          Effect.flatMap((names) =>
            Effect.forEach(names.filter((n) => n.endsWith(".json")), (n) => get(n.slice(0, -5)), { concurrency: 16 })
          ),
          Effect.map((ts) => ts.filter((t): t is TaskRecord => t !== undefined).sort(byQueueOrder))
        )

      // The dispatch loop lists every 2 s, and done tasks pile up. Every change to a record is a
      // rename into the folder, which moves its mtime; this store's own writes fold the record
      // into the cache and take the new mtime (so the view written after each change costs no
      // re-read). An unchanged folder is the last list; another folder (another deployment) is not.
      const cached = yield* Ref.make<{ readonly dir: string; readonly stamp: number; readonly tasks: ReadonlyArray<TaskRecord> } | undefined>(undefined)
      const stamp = (dir: string) =>
        Effect.flatMap(FileSystem.FileSystem, (fs) => fs.stat(dir)).pipe(
          Effect.map((info) => Option.getOrElse(Option.map(info.mtime, (d) => d.getTime()), () => -1)),
          Effect.orElseSucceed(() => -1)
        )
      const list = Effect.gen(function*() {
        const dir = (yield* files).tasksDir
        const at = yield* stamp(dir)
        const last = yield* Ref.get(cached)
        if (last && last.dir === dir && at !== -1 && last.stamp === at) return last.tasks
        const tasks = yield* readAll(dir)
        yield* Ref.set(cached, { dir, stamp: at, tasks })
        return tasks
      })
      const remember = (task: TaskRecord) =>
        Effect.gen(function*() {
          const dir = (yield* files).tasksDir
          const last = yield* Ref.get(cached)
          if (!last || last.dir !== dir) return
          const tasks = [...last.tasks.filter((t) => t.task_id !== task.task_id), task].sort(byQueueOrder)
          yield* Ref.set(cached, { dir, stamp: yield* stamp(dir), tasks })
        })

      const write = (task: TaskRecord) =>
        Effect.flatMap(files, (f) =>
          writeJson(f.taskFile(task.task_id), task).pipe(
            Effect.zipRight(remember(task)),
            Effect.tapError(() => Ref.set(cached, undefined)),
            Effect.mapError((e) => new TaskStoreError({ file: f.taskFile(task.task_id), detail: e.message }))
          ))

      // The journal and the view are the worker's read-only picture; they follow the record and never fail it.
      const announce = (task: TaskRecord) =>
        appendJournal(task.worker, {
          kind: "task",
          task_id: task.task_id,
          status: task.status,
          run_id: task.run_ids.at(-1) ?? null,
          reason: task.reason
        }).pipe(Effect.zipRight(list.pipe(Effect.flatMap((all) => writeTasksView(task.worker, all)))))

      const freshId: Effect.Effect<string, never, TaskStoreEnv> = Effect.gen(function*() {
        const id = `t-${crypto.randomBytes(4).toString("hex")}`
        const file = (yield* files).taskFile(id)
        const taken = yield* Effect.flatMap(FileSystem.FileSystem, (fs) => fs.exists(file)).pipe(Effect.orElseSucceed(() => false))
        return taken ? yield* freshId : id
      })

      const addUnlocked = (t: NewTask) =>
          Effect.gen(function*() {
            const all = yield* list
            const time = yield* now
            const task: TaskRecord = {
              task_id: yield* freshId,
              worker: t.worker,
              prompt: t.prompt,
              status: "queued",
              seq: all.reduce((m, x) => Math.max(m, x.seq), 0) + 1,
              ceiling_min: t.ceilingMin,
              after: t.after,
              origin: t.origin,
              ...(t.channel ? { channel: t.channel } : {}),
              created_at: time,
              updated_at: time,
              started_at: null,
              finished_at: null,
              run_ids: [],
              ended_by: null,
              exit_code: null,
              reason: null
            }
            yield* write(task)
            yield* announce(task)
            return task
          })

      return {
        get,
        list,
        add: (t) => lock.withPermits(1)(addUnlocked(t)),
        addAll: (ts, admit) =>
          lock.withPermits(1)(Effect.gen(function*() {
            const refused = admit(yield* list)
            if (refused) return yield* Effect.fail(refused)
            return yield* Effect.forEach(ts, addUnlocked)
          })),
        update: (taskId, f) =>
          lock.withPermits(1)(Effect.gen(function*() {
            const current = yield* get(taskId)
            if (!current) return yield* Effect.fail(new NoSuchTask({ taskId }))
            const time = yield* now
            const next = f(current, time)
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
