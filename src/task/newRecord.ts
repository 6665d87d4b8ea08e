import type { TaskOrigin, TaskRecord } from "./TaskRecord.js"

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
  /** Its idempotency key: while a task with this key waits or runs, adding another gives that one. */
  readonly key?: string | undefined
  /** Retries after a failure that is no person's decision (absent: [supervisor] retries). */
  readonly retries?: number | undefined
  /** Not before this time (ISO). */
  readonly notBefore?: string | undefined
}


/** A new task's record as every store writes it first: queued, with its id, queue position and time. */
export const newTaskRecord = (t: NewTask, taskId: string, seq: number, time: string): TaskRecord => ({
  task_id: taskId,
  worker: t.worker,
  prompt: t.prompt,
  status: "queued",
  seq,
  ceiling_min: t.ceilingMin,
  after: t.after,
  origin: t.origin,
  ...(t.channel ? { channel: t.channel } : {}),
  ...(t.continues ? { continues: t.continues } : {}),
  ...(t.replyTo ? { reply_to: t.replyTo } : {}),
  ...(t.key ? { key: t.key } : {}),
  ...(t.retries !== undefined ? { retries: t.retries } : {}),
  ...(t.notBefore ? { not_before: t.notBefore } : {}),
  created_at: time,
  updated_at: time,
  started_at: null,
  finished_at: null,
  run_ids: [],
  ended_by: null,
  exit_code: null,
  reason: null
})
