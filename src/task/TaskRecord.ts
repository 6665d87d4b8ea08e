import { Schema } from "effect"
import { ChannelName, isTaskId, RunId, TaskId, WorkerName } from "../config/names.js"

export { isTaskId }

/** Where a task is: waiting its turn, held without a model credential, running, or ended (done, failed, cancelled). */
export const TaskStatus = Schema.Literal("queued", "running", "done", "failed", "cancelled", "held")
export type TaskStatus = typeof TaskStatus.Type

/** A task that will not change again. */
export const isFinal = (s: TaskStatus) => s === "done" || s === "failed" || s === "cancelled"

/** Who queued a task: a person (the CLI, the API) or a worker for itself (set_tasks, from a run). */
export const TaskOrigin = Schema.Struct({
  by: Schema.Literal("person", "self"),
  run_id: Schema.NullOr(RunId),
  task_id: Schema.NullOr(TaskId)
})
export type TaskOrigin = typeof TaskOrigin.Type

/** `data/tasks/records/<id>.json`: one task through its life, written atomically at each change. */
export const TaskRecord = Schema.Struct({
  task_id: TaskId,
  worker: WorkerName,
  prompt: Schema.String,
  status: TaskStatus,
  /** Queue order: tasks are claimed by seq (ties, from two CLIs adding at once, by id). */
  seq: Schema.Number,
  ceiling_min: Schema.NullOr(Schema.Number),
  /** Runs only after this task is done; fails if that one fails or is cancelled. */
  after: Schema.NullOr(TaskId),
  origin: TaskOrigin,
  /** The channel its run serves (/pihome/channel and the worker's store in it). */
  channel: Schema.optional(ChannelName),
  created_at: Schema.String,
  updated_at: Schema.String,
  started_at: Schema.NullOr(Schema.String),
  finished_at: Schema.NullOr(Schema.String),
  run_ids: Schema.Array(RunId),
  ended_by: Schema.NullOr(Schema.String),
  exit_code: Schema.NullOr(Schema.Number),
  /** Why it is held, failed or cancelled — with the fix when there is one. */
  reason: Schema.NullOr(Schema.String),
  final_text: Schema.optional(Schema.NullOr(Schema.String)),
  /** Finished by a daemon that found its box still running after a restart. */
  adopted: Schema.optional(Schema.Boolean),
  /** Follow-ups this task's run queued with set_tasks. */
  queued_tasks: Schema.optional(Schema.Array(TaskId)),
  /** Set only on a record roster could not read: where the file was put aside. Such a task is listed as failed and never run. */
  unreadable: Schema.optional(Schema.Struct({ file: Schema.String }))
})
export type TaskRecord = typeof TaskRecord.Type


/** A task id that names no task. */
export class NoSuchTask extends Schema.TaggedError<NoSuchTask>()("NoSuchTask", { taskId: Schema.String }) {
  override get message() {
    return `no task ${this.taskId} — list them: roster task list`
  }
}

/** A task refused before it was queued (or a change refused), with the reason and the fix. */
export class TaskRefused extends Schema.TaggedError<TaskRefused>()("TaskRefused", { detail: Schema.String }) {
  override get message() {
    return this.detail
  }
}

/** A task record that could not be written. */
export class TaskStoreError extends Schema.TaggedError<TaskStoreError>()("TaskStoreError", {
  file: Schema.String,
  detail: Schema.String
}) {
  override get message() {
    return `cannot write the task record ${this.file}: ${this.detail} — check that the data dir is writable`
  }
}
