import { FileSystem, Path } from "@effect/platform"
import { Clock, Context, Effect, Layer, Option, Ref } from "effect"
import * as crypto from "node:crypto"
import { captureHostFiles, Paths, layout } from "../config/Paths.js"
import { writeJson } from "../fs/atomic.js"
import { Files } from "../fs/Files.js"
import { appendJournal } from "../journal/journal.js"
import { isTaskId, NoSuchTask, type TaskOrigin, type TaskRecord, type TaskRefused, TaskStoreError } from "./TaskRecord.js"
import { asideAsTask, putAside, readTaskFile } from "./unreadable.js"
import { writeTasksView } from "./view.js"

/** A task to add to the store: who does it, what, with which ceiling, after which task, in which channel, queued by whom. */
export interface NewTask {
  readonly worker: string
  readonly prompt: string
  readonly ceilingMin: number | null
  readonly after: string | null
  readonly channel?: string | undefined
  readonly origin: TaskOrigin
  /** The task and run whose pi session it resumes. */
  readonly continues?: { readonly task_id: string | null; readonly run_id: string | null } | undefined
  /** Where its answer goes when it ends. */
  readonly replyTo?: string | undefined
}

/** What the store reads its files through (captured when its layer is built): the deployment's folders, the file system, the journal's appends. */
export type TaskStoreEnv = Paths | FileSystem.FileSystem | Path.Path | Files

/** Queue order: by seq, then id (two CLIs adding at once while the daemon is down share a seq). */
export const byQueueOrder = (a: TaskRecord, b: TaskRecord) => a.seq - b.seq || (a.task_id < b.task_id ? -1 : 1)

/**
 * The task records under `data/tasks/records`. Every change is an atomic write, then a journal
 * line and a fresh view of the worker's queue. One writer at a time in this process; while the
 * daemon runs it is the only process that writes (the CLI goes through its API).
 */
export class TaskStore extends Context.Tag("roster/TaskStore")<TaskStore, {
  readonly add: (task: NewTask) => Effect.Effect<TaskRecord, TaskStoreError>
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
  /** Read, change and write one task under the store's lock; `f` returning the record unchanged writes nothing. */
  readonly update: (
    taskId: string,
    f: (task: TaskRecord, now: string) => TaskRecord
  ) => Effect.Effect<TaskRecord, NoSuchTask | TaskStoreError>
}>() {
  /** Holds the lock, the list cache and the file services it was built with. */
  static readonly layer = Layer.effect(
    TaskStore,
    Effect.gen(function*() {
      const env = Context.add(yield* captureHostFiles, Files, yield* Files)
      const own = <A, E>(effect: Effect.Effect<A, E, TaskStoreEnv>) => Effect.provide(effect, env)
      const lock = yield* Effect.makeSemaphore(1)
      const now = Clock.currentTimeMillis.pipe(Effect.map((ms) => new Date(ms).toISOString()))
      const files = Effect.map(Paths, layout)
      // Each unreadable record is said once per process (the daemon: once), beside its listing as failed.
      const reported = new Set<string>()
      const report = (task: TaskRecord) =>
        task.unreadable && !reported.has(task.unreadable.file)
          ? Effect.sync(() => reported.add(task.unreadable?.file ?? "")).pipe(Effect.zipRight(Effect.logWarning(`task ${task.task_id}: ${task.reason}`)))
          : Effect.void

      /** One records-folder file as a task: a file that does not decode is put aside and listed as failed. */
      const readOne = (name: string) =>
        Effect.gen(function*() {
          const f = yield* files
          const path = yield* Path.Path
          const file = path.join(f.tasksDir, name)
          const read = yield* readTaskFile(file)
          if (read._tag === "Task") {
            // A record under another id's name would be confused with that task: it is damaged too.
            if (`${read.task.task_id}.json` === name) return read.task
            const aside = yield* putAside(file, f.tasksUnreadableDir, `it names task ${read.task.task_id} but is filed as ${name}`, JSON.stringify(read.task))
            return yield* asideAsTask(aside)
          }
          if (read._tag === "Gone") return undefined
          return yield* asideAsTask(yield* putAside(file, f.tasksUnreadableDir, read.error, read.raw))
        }).pipe(
          // Another reader put it aside first: it is listed from there.
          Effect.catchIf((e) => e._tag === "SystemError" && e.reason === "NotFound", () => Effect.succeed(undefined)),
          Effect.catchAll((e) => Effect.logWarning(`task record ${name} could not be read or put aside: ${e.message}`).pipe(Effect.as(undefined)))
        )

      const readAside = Effect.gen(function*() {
        const f = yield* files
        const path = yield* Path.Path
        const names = yield* Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readDirectory(f.tasksUnreadableDir)).pipe(
          Effect.orElseSucceed((): ReadonlyArray<string> => [])
        )
        return yield* Effect.forEach(names.filter((n) => n.endsWith(".json")), (n) => asideAsTask(path.join(f.tasksUnreadableDir, n)).pipe(Effect.option))
      })

      const get = (taskId: string) =>
        Effect.gen(function*() {
          if (!isTaskId(taskId)) return undefined
          const found = yield* readOne(`${taskId}.json`)
          if (found) {
            yield* report(found)
            return found
          }
          const aside = (yield* readAside).flatMap((o) => (o._tag === "Some" && o.value.task_id === taskId ? [o.value] : []))[0]
          if (aside) yield* report(aside)
          return aside
        })

      const readAll = (dir: string) =>
        Effect.gen(function*() {
          const names = yield* Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readDirectory(dir)).pipe(Effect.orElseSucceed((): ReadonlyArray<string> => []))
          const read = yield* Effect.forEach(names.filter((n) => n.endsWith(".json")), readOne, { concurrency: 16 })
          const aside = (yield* readAside).flatMap((o) => (o._tag === "Some" ? [o.value] : []))
          // Put aside just now and read back from the aside folder too: listed once.
          const seen = new Set<string>()
          const all = [...read, ...aside].filter((t): t is TaskRecord => {
            if (t === undefined) return false
            const key = t.unreadable?.file ?? t.task_id
            if (seen.has(key)) return false
            seen.add(key)
            return true
          })
          yield* Effect.forEach(all, report)
          return all.sort(byQueueOrder)
        })

      // The dispatch loop lists every 2 s, and done tasks pile up. Every change to a record is a
      // rename into the folder, which moves its mtime; this store's own writes fold the record
      // into the cache and take the new mtime (so the view written after each change costs no
      // re-read). An unchanged folder is the last list; another folder (another deployment) is not.
      const cached = yield* Ref.make<{ readonly dir: string; readonly stamp: string; readonly tasks: ReadonlyArray<TaskRecord> } | undefined>(undefined)
      const mtimeOf = (dir: string) =>
        Effect.flatMap(FileSystem.FileSystem, (fs) => fs.stat(dir)).pipe(
          Effect.map((info) => Option.getOrElse(Option.map(info.mtime, (d) => d.getTime()), () => -1)),
          Effect.orElseSucceed(() => -1)
        )
      const stamp = Effect.gen(function*() {
        const f = yield* files
        const [records, aside] = [yield* mtimeOf(f.tasksDir), yield* mtimeOf(f.tasksUnreadableDir)]
        return records === -1 ? "" : `${records}/${aside}`
      })
      const list = Effect.gen(function*() {
        const dir = (yield* files).tasksDir
        const at = yield* stamp
        const last = yield* Ref.get(cached)
        if (last && last.dir === dir && at !== "" && last.stamp === at) return last.tasks
        const tasks = yield* readAll(dir)
        // The stamp from before the read: a write that lands during it leaves the folder newer than
        // this list, so the next list reads again (a stamp taken after would keep a stale list).
        yield* Ref.set(cached, { dir, stamp: at, tasks })
        return tasks
      })
      const remember = (task: TaskRecord) =>
        Effect.gen(function*() {
          const dir = (yield* files).tasksDir
          const last = yield* Ref.get(cached)
          if (!last || last.dir !== dir) return
          const tasks = [...last.tasks.filter((t) => t.task_id !== task.task_id || t.unreadable), task].sort(byQueueOrder)
          yield* Ref.set(cached, { dir, stamp: yield* stamp, tasks })
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
        const f = yield* files
        const taken = yield* Effect.flatMap(FileSystem.FileSystem, (fs) =>
          Effect.all([fs.exists(f.taskFile(id)), fs.exists(`${f.tasksUnreadableDir}/${id}.json`)])).pipe(
            Effect.map(([a, b]) => a || b),
            Effect.orElseSucceed(() => false)
          )
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
              ...(t.continues ? { continues: t.continues } : {}),
              ...(t.replyTo ? { reply_to: t.replyTo } : {}),
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
        get: (taskId) => own(get(taskId)),
        list: own(list),
        add: (t) => own(lock.withPermits(1)(addUnlocked(t))),
        addAll: (ts, admit) =>
          own(lock.withPermits(1)(Effect.gen(function*() {
            const refused = admit(yield* list)
            if (refused) return yield* Effect.fail(refused)
            return yield* Effect.forEach(ts, addUnlocked)
          }))),
        update: (taskId, f) =>
          own(lock.withPermits(1)(Effect.gen(function*() {
            const current = yield* get(taskId)
            if (!current) return yield* Effect.fail(new NoSuchTask({ taskId }))
            // A record put aside is never rewritten: what it holds is a person's to read.
            if (current.unreadable) return current
            const time = yield* now
            const next = f(current, time)
            if (next === current) return current
            const stamped = { ...next, updated_at: time }
            yield* write(stamped)
            if (stamped.status !== current.status) yield* announce(stamped)
            return stamped
          })))
      }
    })
  )
}
