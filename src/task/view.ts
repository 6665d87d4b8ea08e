import { FileSystem, Path } from "@effect/platform"
import { Clock, Effect } from "effect"
import { Paths, layout } from "../config/Paths.js"
import { isFinal, type TaskRecord } from "./TaskRecord.js"

/** What a worker sees of its queue: its tasks not yet ended, in order. */
export const tasksViewOf = (worker: string, all: ReadonlyArray<TaskRecord>, time: string) => ({
  worker,
  updated_at: time,
  tasks: all.filter((t) => t.worker === worker && !isFinal(t.status)).map((t) => ({
    task_id: t.task_id,
    status: t.status,
    prompt: t.prompt,
    after: t.after,
    ceiling_min: t.ceiling_min,
    origin: t.origin.by,
    created_at: t.created_at,
    run_id: t.run_ids.at(-1) ?? null
  }))
})

/**
 * Rewrites `data/tasks/views/<worker>.json` in place: it is bind-mounted read-only at
 * /pihome/self/schedule.json, and a rename would leave a running box reading the old file.
 */
export const writeTasksView = (worker: string, all: ReadonlyArray<TaskRecord>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const file = layout(yield* Paths).tasksView(worker)
    const time = new Date(yield* Clock.currentTimeMillis).toISOString()
    yield* fs.makeDirectory((yield* Path.Path).dirname(file), { recursive: true })
    yield* fs.writeFileString(file, `${JSON.stringify(tasksViewOf(worker, all, time), null, 2)}\n`)
  }).pipe(Effect.catchAll((e) => Effect.logWarning(`the task view of ${worker} could not be written: ${e.message}`)))
