import type { FileSystem } from "@effect/platform"
import { Effect, Option, Ref } from "effect"
import type { Layout } from "../config/Paths.js"
import type { TaskRecord } from "./TaskRecord.js"
import { byQueueOrder } from "./readTasks.js"

/**
 * The task list, read again only when the records folder changed. The dispatch loop lists every
 * 2 s, and done tasks pile up. Every change to a record is a rename into the folder, which moves
 * its mtime; the store's own writes fold the record into the cache and take the new mtime (so the
 * view written after each change costs no re-read). An unchanged folder is the last list.
 */
export const makeListCache = (
  fs: FileSystem.FileSystem,
  f: Layout,
  readAll: (dir: string) => Effect.Effect<ReadonlyArray<TaskRecord>>
) =>
  Effect.gen(function*() {
    const cached = yield* Ref.make<{ readonly dir: string; readonly stamp: string; readonly tasks: ReadonlyArray<TaskRecord> } | undefined>(undefined)
    const mtimeOf = (dir: string) =>
      fs.stat(dir).pipe(
        Effect.map((info) => Option.getOrElse(Option.map(info.mtime, (d) => d.getTime()), () => -1)),
        Effect.orElseSucceed(() => -1)
      )
    const stamp = Effect.gen(function*() {
      const [records, aside] = [yield* mtimeOf(f.tasksDir), yield* mtimeOf(f.tasksUnreadableDir)]
      return records === -1 ? "" : `${records}/${aside}`
    })
    const list = Effect.gen(function*() {
      const dir = f.tasksDir
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
        const dir = f.tasksDir
        const last = yield* Ref.get(cached)
        if (!last || last.dir !== dir) return
        const tasks = [...last.tasks.filter((t) => t.task_id !== task.task_id || t.unreadable), task].sort(byQueueOrder)
        yield* Ref.set(cached, { dir, stamp: yield* stamp, tasks })
      })
    /** After a write that failed: the next list reads the folder. */
    const forget = Ref.set(cached, undefined)
    return { list, remember, forget }
  })
