import type { FileSystem } from "@effect/platform"
import { Clock, Effect, Option, Ref } from "effect"
import type { Layout } from "../config/Paths.js"
import type { TaskRecord } from "./TaskRecord.js"
import { byQueueOrder } from "./readTasks.js"

interface Cached {
  readonly dir: string
  readonly stamp: string
  readonly tasks: ReadonlyArray<TaskRecord>
}

/**
 * A folder changed this recently may change again within the same tick of its mtime (the kernel's clock
 * for file times is coarse: a few milliseconds), so a list read then is not kept: the next list reads again.
 */
const SETTLED_MS = 1_000

/**
 * The task list, read again only when the records folder changed. The dispatch loop lists every
 * 2 s, and done tasks pile up. Every change to a record is a rename into the folder, which moves
 * its mtime; the store's own writes fold the record into the cache and take the new mtime (so the
 * view written after each change costs no re-read). An unchanged folder is the last list.
 *
 * A read runs beside the store's writes (it takes no lock), so it keeps what it read only if no write
 * was folded in meanwhile: a list read before a write and kept after it would hold that task as it was,
 * and every later write, folded into it and stamped anew, would keep it so — a task done on disk and
 * running in the daemon's eyes, its worker's queue stuck behind it.
 */
export const makeListCache = (
  fs: FileSystem.FileSystem,
  f: Layout,
  readAll: (dir: string) => Effect.Effect<ReadonlyArray<TaskRecord>>
) =>
  Effect.gen(function*() {
    const state = yield* Ref.make<{ readonly cached: Cached | undefined; readonly writes: number }>({ cached: undefined, writes: 0 })
    const mtimeOf = (dir: string) =>
      fs.stat(dir).pipe(
        Effect.map((info) => Option.getOrElse(Option.map(info.mtime, (d) => d.getTime()), () => -1)),
        // No stamp (-1): the records folder is read again at every list, never served stale.
        Effect.orElseSucceed(() => -1)
      )
    const stampOf = Effect.gen(function*() {
      const [records, aside] = [yield* mtimeOf(f.tasksDir), yield* mtimeOf(f.tasksUnreadableDir)]
      return { stamp: records === -1 ? "" : `${records}/${aside}`, newest: Math.max(records, aside) }
    })
    const list = Effect.gen(function*() {
      const dir = f.tasksDir
      const { writes, cached } = yield* Ref.get(state)
      const at = yield* stampOf
      if (cached && cached.dir === dir && at.stamp !== "" && cached.stamp === at.stamp) return cached.tasks
      const tasks = yield* readAll(dir)
      // The stamp from before the read: a write that lands during it leaves the folder newer than this list,
      // so the next list reads again — unless it landed in the same tick of the folder's mtime: a folder
      // changed within the last second is read again next time whatever its stamp.
      const settled = (yield* Clock.currentTimeMillis) - at.newest >= SETTLED_MS
      yield* Ref.update(state, (s) => (s.writes === writes ? { ...s, cached: { dir, stamp: settled ? at.stamp : "", tasks } } : s))
      return tasks
    })
    const remember = (task: TaskRecord) =>
      Effect.gen(function*() {
        const dir = f.tasksDir
        const { stamp } = yield* stampOf
        yield* Ref.update(state, (s) => {
          const last = s.cached
          if (!last || last.dir !== dir) return { ...s, writes: s.writes + 1 }
          const tasks = [...last.tasks.filter((t) => t.task_id !== task.task_id || t.unreadable), task].sort(byQueueOrder)
          return { cached: { dir, stamp, tasks }, writes: s.writes + 1 }
        })
      })
    /** After a write that failed: the next list reads the folder. */
    const forget = Ref.update(state, (s) => ({ cached: undefined, writes: s.writes + 1 }))
    return { list, remember, forget }
  })
