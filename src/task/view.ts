import { Clock, Effect, Schema } from "effect"
import { layout } from "../config/Paths.js"
import { orMakeParentIn } from "../fs/orMakeParent.js"
import type { TaskPlace } from "./place.js"
import { isFinal, type TaskRecord, TaskOrigin, TaskStatus } from "./TaskRecord.js"

/** One task as its worker sees it in its queue. */
export const ViewEntry = Schema.Struct({
  task_id: Schema.String,
  status: TaskStatus,
  prompt: Schema.String,
  after: Schema.NullOr(Schema.String),
  ceiling_min: Schema.NullOr(Schema.Number),
  origin: TaskOrigin.fields.by,
  created_at: Schema.String,
  run_id: Schema.NullOr(Schema.String)
})
export type ViewEntry = typeof ViewEntry.Type

/** A task's entry in its worker's view (the fleet's store builds the same in SQL: keep the two alike). */
export const viewEntry = (t: TaskRecord): ViewEntry => ({
  task_id: t.task_id,
  status: t.status,
  prompt: t.prompt,
  after: t.after,
  ceiling_min: t.ceiling_min,
  origin: t.origin.by,
  created_at: t.created_at,
  run_id: t.run_ids.at(-1) ?? null
})

/** What a worker sees of its queue: its tasks not yet ended, in order. */
export const tasksViewOf = (worker: string, all: ReadonlyArray<TaskRecord>, time: string) => ({
  worker,
  updated_at: time,
  tasks: viewEntriesOf(worker, all)
})

export const viewEntriesOf = (worker: string, all: ReadonlyArray<TaskRecord>) =>
  all.filter((t) => t.worker === worker && !isFinal(t.status)).map(viewEntry)

/** A worker's queue view, written through what a store took when its layer was built. */
export const viewIn = ({ fs, path, paths }: Omit<TaskPlace, "files">) => {
  const where = layout(paths)
  const orMakeParent = orMakeParentIn(fs, path)
  /**
   * Rewrites `data/tasks/views/<worker>.json` in place: it is bind-mounted read-only at
   * /pihome/self/schedule.json, and a rename would leave a running box reading the old file.
   */
  const writeViewEntries = (worker: string, tasks: ReadonlyArray<ViewEntry>) =>
    Effect.gen(function*() {
      const file = where.tasksView(worker)
      const time = new Date(yield* Clock.currentTimeMillis).toISOString()
      yield* orMakeParent(file, fs.writeFileString(file, `${JSON.stringify({ worker, updated_at: time, tasks }, null, 2)}\n`))
    }).pipe(Effect.catchAll((e) => Effect.logWarning(`the task view of ${worker} could not be written: ${e.message}`)))
  return {
    writeViewEntries,
    writeTasksView: (worker: string, all: ReadonlyArray<TaskRecord>) => writeViewEntries(worker, viewEntriesOf(worker, all))
  }
}
