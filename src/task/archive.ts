import { Effect } from "effect"
import { layout } from "../config/Paths.js"
import type { TaskPlace } from "./place.js"
import { isFinal, isTaskId, type TaskRecord, TaskStoreError } from "./TaskRecord.js"
import { readTaskFile } from "./unreadable.js"
import { byQueueOrder } from "./readTasks.js"
import { namesIn } from "../fs/namesIn.js"

/** Whether a finished task still owes its answer (a reply_to not yet delivered, or a delivery under way). */
const owesAnswer = (t: TaskRecord) =>
  t.reply_to !== undefined && t.reply_to !== null && t.reply_to !== "none" && (t.delivery === undefined || t.delivery.pending === true)

/**
 * The finished tasks that may leave the live list: ended before `before` (ms), their answer
 * delivered (or none owed), and no task that waits or runs still needs them (its `after`, the
 * task it continues) — the dispatch reads only the live list, so such a task must stay in it.
 */
export const archivable = (all: ReadonlyArray<TaskRecord>, before: number): ReadonlyArray<TaskRecord> => {
  const needed = new Set(all.filter((t) => !isFinal(t.status)).flatMap((t) => [t.after, t.continues?.task_id ?? null]))
  return all.filter((t) =>
    isFinal(t.status) && t.unreadable === undefined && t.finished_at !== null && Date.parse(t.finished_at) < before &&
    !needed.has(t.task_id) && !owesAnswer(t)
  )
}

/** The month folder a finished task is archived in: `data/tasks/archive/<YYYY-MM>/`. */
const monthOf = (t: TaskRecord) => {
  const m = (t.finished_at ?? t.updated_at).slice(0, 7)
  return /^\d{4}-\d{2}$/.test(m) ? m : "undated"
}

const archiveError = (file: string) => (e: { readonly message: string }) => new TaskStoreError({ file, detail: e.message })

/** The local archive: `data/tasks/archive/<month>/<id>.json`, each record moved there by a rename. */
export const localArchive = ({ fs, path, paths }: Omit<TaskPlace, "files">) => {
  const f = layout(paths)
  const root = f.tasksArchiveDir
  const read = readTaskFile(fs)
  return {
  /** Moves each of `tasks` out of the records folder into its month's folder (a rename: never half a file). */
  move: (tasks: ReadonlyArray<TaskRecord>) =>
    Effect.gen(function*() {
      for (const t of tasks) {
        const dir = path.join(f.tasksArchiveDir, monthOf(t))
        yield* fs.makeDirectory(dir, { recursive: true }).pipe(Effect.mapError(archiveError(dir)))
        yield* fs.rename(f.taskFile(t.task_id), path.join(dir, `${t.task_id}.json`)).pipe(Effect.mapError(archiveError(f.taskFile(t.task_id))))
      }
      return tasks.length
    }),
  /** One archived task by id (any month), or none. */
  get: (taskId: string) =>
    Effect.gen(function*() {
      if (!isTaskId(taskId)) return undefined
      const months = yield* namesIn(fs, root, "the task archive")
      for (const m of [...months].sort().reverse()) {
        const got = yield* read(path.join(root, m, `${taskId}.json`))
        if (got._tag === "Task") return { ...got.task, archived: true }
      }
      return undefined
    }),
  /** Every archived task, in queue order; a file that does not decode is skipped (the archive is never rewritten). */
  list: Effect.gen(function*() {
    const months = yield* namesIn(fs, root, "the task archive")
    const out: Array<TaskRecord> = []
    for (const m of months) {
      const names = yield* namesIn(fs, path.join(root, m), `the task archive's month ${m}`)
      const got = yield* Effect.forEach(names.filter((n) => n.endsWith(".json")), (n) => read(path.join(root, m, n)), { concurrency: 16 })
      for (const r of got) if (r._tag === "Task") out.push({ ...r.task, archived: true })
    }
    return out.sort(byQueueOrder)
  })
  }
}
