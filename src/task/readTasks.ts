import { FileSystem, Path } from "@effect/platform"
import { Effect } from "effect"
import { Paths, layout } from "../config/Paths.js"
import { isTaskId, type TaskRecord } from "./TaskRecord.js"
import { asideAsTask, putAside, readTaskFile } from "./unreadable.js"

/** Queue order: by seq, then id (two CLIs adding at once while the daemon is down share a seq). */
export const byQueueOrder = (a: TaskRecord, b: TaskRecord) => a.seq - b.seq || (a.task_id < b.task_id ? -1 : 1)

export const taskFiles = Effect.map(Paths, layout)

/**
 * Reading the records folder: one task by id, or all of them in queue order. A file that does
 * not decode is put aside and listed as failed (said once per reader).
 */
export const makeTaskReader = () => {
  const files = taskFiles
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

  return { get, readAll }
}
