import { Schema } from "effect"
import { ChannelName, isTaskId, RunId, TaskId, WorkerName } from "../config/names.js"
import { TaskOrigin } from "../contract/origin.js"

export { isTaskId }

/** Where a task is: waiting its turn, held without a model credential, running, or ended (done, failed, cancelled). */
export const TaskStatus = Schema.Literal("queued", "running", "done", "failed", "cancelled", "held")
export type TaskStatus = typeof TaskStatus.Type

/** A task that will not change again. */
export const isFinal = (s: TaskStatus) => s === "done" || s === "failed" || s === "cancelled"

export { TaskOrigin } from "../contract/origin.js"

/** How a task's answer was delivered to its reply_to. */
export const Delivery = Schema.Struct({
  target: Schema.String,
  at: Schema.String,
  ok: Schema.Boolean,
  error: Schema.optional(Schema.String),
  /**
   * Written before the outside effect (a post): the delivery is under way, by `claim`. Found at a
   * daemon's start, it was cut by a crash: the place is searched for `mark` before anything is
   * posted again, so an answer is posted once.
   */
  pending: Schema.optional(Schema.Literal(true)),
  mark: Schema.optional(Schema.String),
  claim: Schema.optional(Schema.String)
})
export type Delivery = typeof Delivery.Type

/** Another task's answer, delivered to this one. */
export const Reply = Schema.Struct({
  from_task: TaskId,
  worker: WorkerName,
  at: Schema.String,
  /** done: its final answer; failed or cancelled: how it ended and why. */
  status: Schema.String,
  text: Schema.String
})
export type Reply = typeof Reply.Type

/** An idempotency key: printable, at most 128 characters. */
export const TaskKey = Schema.String.pipe(Schema.pattern(/^[\x21-\x7e]{1,128}$/, { message: () => "a key is 1 to 128 printable characters, no spaces" }))

/**
 * A task that holds `key` for `worker`: a key is its worker's own (one worker's key never names
 * another's task), held while the task waits or runs.
 */
export const holdsKey = (t: { readonly worker: string; readonly key?: string | undefined; readonly status: TaskStatus }, worker: string, key: string | undefined) =>
  key !== undefined && t.worker === worker && t.key === key && !isFinal(t.status)

/** A task as `task add` answers it: the task, and whether it was already there (its key was in use). */
export type AddedTask = TaskRecord & { readonly existed?: boolean }

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
  /** Under [cluster]: the fleet node whose box runs or ran it, and that attempt's number (a lost node's attempt is fenced by the next). */
  node: Schema.optional(Schema.String),
  attempt: Schema.optional(Schema.Number),
  /**
   * Under [cluster]: each attempt a lost node left running, fenced by the fleet (nothing it does
   * after can land), and which node fenced it. A task is re-run after its first loss only.
   */
  lost: Schema.optional(Schema.Array(Schema.Struct({
    node: Schema.String,
    attempt: Schema.Number,
    run_id: Schema.NullOr(RunId),
    at: Schema.String,
    by: Schema.String
  }))),
  /** A cancel asked on another node of the fleet: the node running it stops its box when it sees this. */
  cancel_requested: Schema.optional(Schema.Struct({ at: Schema.String, on_node: Schema.String })),
  /**
   * The last run a stop, a crash or a reboot ended (its box gone or killed by the stop): the task
   * went back to the queue and carries on as a continuation of that run. `by`: "stop" (roster
   * server stop), "restart" (the daemon died with its box — a crash or a reboot).
   */
  interrupted: Schema.optional(Schema.Struct({ run_id: RunId, by: Schema.Literal("stop", "restart", "cut-off"), at: Schema.String })),
  /** Finished by a daemon that found its box still running after a restart. */
  adopted: Schema.optional(Schema.Boolean),
  /** Follow-ups this task's run queued with set_tasks. */
  queued_tasks: Schema.optional(Schema.Array(TaskId)),
  /** The task and run whose pi session this one resumes (`--continue`, set_tasks `continue`); run_id null: that task's last run, once it has one. */
  continues: Schema.optional(Schema.Struct({ task_id: Schema.NullOr(TaskId), run_id: Schema.NullOr(RunId) })),
  /** Tasks that continue this one. */
  continued_by: Schema.optional(Schema.Array(TaskId)),
  /** Where its answer goes when it ends: talk:<run-id>, task:<id>, chat:<provider>:<channel>[/<thread>] or none. */
  reply_to: Schema.optional(Schema.NullOr(Schema.String)),
  /** The delivery of its answer to reply_to: once, recorded whatever its outcome. */
  delivery: Schema.optional(Delivery),
  /** Answers of other tasks delivered here (their reply_to was task:<this id>). */
  replies: Schema.optional(Schema.Array(Reply)),
  /** How many times it may be tried again after a failure that is no person's decision (`task add --retries`; else [supervisor] retries). */
  retries: Schema.optional(Schema.Number),
  /** Not claimed before this time (`task add --at`, or a retry's backoff): until then it waits. */
  not_before: Schema.optional(Schema.String),
  /** Each run of it that ended, and how: the attempts a retry or a resume added. */
  attempts: Schema.optional(Schema.Array(Schema.Struct({ run_id: RunId, ended_by: Schema.String, at: Schema.String, reason: Schema.NullOr(Schema.String) }))),
  /** Its idempotency key (`task add --key`): one unfinished task per key. */
  key: Schema.optional(TaskKey),
  /** Read from the archive (finished past [supervisor] keep_days): shown, never changed again. */
  archived: Schema.optional(Schema.Boolean),
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
  detail: Schema.String,
  /** What fixes it, when the store is not the data dir's files (the fleet's database). */
  fix: Schema.optional(Schema.String)
}) {
  override get message() {
    return `cannot write the task record ${this.file}: ${this.detail} — ${this.fix ?? "check that the data dir is writable"}`
  }
}
