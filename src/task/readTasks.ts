import { Effect } from "effect"
import { layout } from "../config/Paths.js"
import type { TaskPlace } from "./place.js"
import { isTaskId, type TaskRecord } from "./TaskRecord.js"
import { asideAsTask, putAside, readTaskFile } from "./unreadable.js"
import { namesIn } from "../fs/namesIn.js"
import { isNotFound } from "../fs/notFound.js"

/** Queue order: by seq, then id (two CLIs adding at once while the daemon is down share a seq). */
export const byQueueOrder = (a: TaskRecord, b: TaskRecord) => a.seq - b.seq || (a.task_id < b.task_id ? -1 : 1)

/**
 * Reading the records folder: one task by id, or all of them in queue order. A file that does
 * not decode is put aside and listed as failed (said once per reader).
 */
export const makeTaskReader = ({ fs, path, paths }: Omit<TaskPlace, "files">) => {
  const f = layout(paths)
  const read = readTaskFile(fs)
  const aside = putAside(fs, path)
  const asTask = asideAsTask(fs, path)
  // Each unreadable record is said once per process (the daemon: once), beside its listing as failed.
  const reported = new Set<string>()
  const report = (task: TaskRecord) =>
    task.unreadable && !reported.has(task.unreadable.file)
      ? Effect.sync(() => reported.add(task.unreadable?.file ?? "")).pipe(Effect.zipRight(Effect.logWarning(`task ${task.task_id}: ${task.reason}`)))
      : Effect.void

  /** One records-folder file as a task: a file that does not decode is put aside and listed as failed. */
  const readOne = (name: string) =>
    Effect.gen(function*() {
      const file = path.join(f.tasksDir, name)
      const got = yield* read(file)
      if (got._tag === "Task") {
        // A record under another id's name would be confused with that task: it is damaged too.
        if (`${got.task.task_id}.json` === name) return got.task
        return yield* asTask(yield* aside(file, f.tasksUnreadableDir, `it names task ${got.task.task_id} but is filed as ${name}`, JSON.stringify(got.task)))
      }
      if (got._tag === "Gone") return undefined
      return yield* asTask(yield* aside(file, f.tasksUnreadableDir, got.error, got.raw))
    }).pipe(
      // Another reader put it aside first: it is listed from there.
      Effect.catchIf(isNotFound, () => Effect.succeed(undefined)),
      Effect.catchAll((e) => Effect.logWarning(`task record ${name} could not be read or put aside: ${e.message}`).pipe(Effect.as(undefined)))
    )

  const readAside = Effect.gen(function*() {
    const names = yield* namesIn(fs, f.tasksUnreadableDir, "the task records put aside")
    return yield* Effect.forEach(names.filter((n) => n.endsWith(".json")), (n) => asTask(path.join(f.tasksUnreadableDir, n)).pipe(Effect.option))
  })

  const get = (taskId: string) =>
    Effect.gen(function*() {
      if (!isTaskId(taskId)) return undefined
      const found = yield* readOne(`${taskId}.json`)
      if (found) {
        yield* report(found)
        return found
      }
      const put = (yield* readAside).flatMap((o) => (o._tag === "Some" && o.value.task_id === taskId ? [o.value] : []))[0]
      if (put) yield* report(put)
      return put
    })

  const readAll = (dir: string) =>
    Effect.gen(function*() {
      const names = yield* namesIn(fs, dir, "the task records")
      const got = yield* Effect.forEach(names.filter((n) => n.endsWith(".json")), readOne, { concurrency: 16 })
      const put = (yield* readAside).flatMap((o) => (o._tag === "Some" ? [o.value] : []))
      // Put aside just now and read back from the aside folder too: listed once.
      const seen = new Set<string>()
      const all = [...got, ...put].filter((t): t is TaskRecord => {
        if (t === undefined) return false
        const key = t.unreadable?.file ?? t.task_id
        if (seen.has(key)) return false
        seen.add(key)
        return true
      })
      yield* Effect.forEach(all, report)
      return all.sort(byQueueOrder)
    })

  return { get, readAll }
}
