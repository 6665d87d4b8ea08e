import { Clock, Effect, Schema } from "effect"
import { validateCeiling } from "../box/ceiling.js"
import { validateChannelName, validateWorkerName } from "../config/names.js"
import { linkContinuation } from "../task/links.js"
import { checkReplyTo, PERSON_ASKS } from "../reply/replyTo.js"
import type { HostFiles } from "../config/Paths.js"
import { isFinal, NoSuchTask, TaskKey, type TaskOrigin, type TaskRecord, TaskRefused } from "../task/TaskRecord.js"
import { TaskStore } from "../task/TaskStore.js"
import { CANCELLED } from "./taskEnd.js"
import { readIdentity } from "../worker/workers.js"
import { killRunOrSay } from "../backend/killOrSay.js"

/** What queueing a task asks for: `roster task add`'s worker, prompt, ceiling, `--after`, `--channel`, `--continue` and `--reply-to`. */
export interface TaskRequest {
  readonly worker: string
  readonly prompt: string
  readonly ceiling_min?: number | undefined
  readonly after?: string | undefined
  readonly channel?: string | undefined
  /** A task of the same worker whose conversation this one carries on. */
  readonly continue?: string | undefined
  readonly reply_to?: string | undefined
  /** An idempotency key: while a task with it waits or runs, this request gives that task back. */
  readonly key?: string | undefined
  /** Tries again after a failure that is no person's decision (absent: [supervisor] retries). */
  readonly retries?: number | undefined
  /** Not before this time: an ISO time, or from now: +30s, +30m, +2h, +1d. */
  readonly at?: string | undefined
}

/** How far ahead `--at` may put a task: a year. */
export const MAX_AT_DAYS = 365

/** `--at`: an ISO time, or a span from `now` (+30s, +30m, +2h, +1d), at most a year ahead; the time as ISO, or why not. */
export const runAt = (at: string, now: number): string | { readonly why: string } => {
  const form = `--at ${JSON.stringify(at)}: a time (2026-12-24T09:00:00Z) or a span from now (+30m, +2h, +1d)`
  const span = /^\+(\d+(?:\.\d+)?)([smhd])$/.exec(at.trim())
  const t = span
    ? now + Number(span[1]) * { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[span[2] as "s" | "m" | "h" | "d"]
    : /\d{4}-\d{2}-\d{2}/.test(at) ? Date.parse(at) : Number.NaN
  if (!Number.isFinite(t)) return { why: form }
  // Past a year (or past what a date can hold) is a typo, not a plan.
  if (t > now + MAX_AT_DAYS * 86_400_000) return { why: `${form}, at most ${MAX_AT_DAYS} days ahead (+${MAX_AT_DAYS}d)` }
  return new Date(t).toISOString()
}

/** A live task, else an archived one, else none: what a new task may name (`--continue`, `--after`). */
/**
 * For a lookup past the live tasks: an archive that cannot be read is said (with the task it was read
 * for) and taken for no such task there — a live task never depends on it.
 */
export const archiveUnread = (taskId: string) => <A, E extends { readonly message: string }, R>(self: Effect.Effect<A, E, R>) =>
  self.pipe(Effect.catchAll((e) => Effect.logWarning(`the task archive could not be read looking for ${taskId} (${e.message})`).pipe(Effect.as(undefined))))

const namedTask = (taskId: string) =>
  Effect.gen(function*() {
    const store = yield* TaskStore
    return (yield* store.get(taskId)) ?? (yield* store.getArchived(taskId).pipe(archiveUnread(taskId)))
  })

/**
 * What `--continue <task-id>` resumes: that task of the same worker, its last run (or the run it
 * will have). An archived task is carried on from its last run alone: its record is never changed again.
 */
const continuation = (worker: string, taskId: string) =>
  Effect.gen(function*() {
    const of = yield* namedTask(taskId)
    if (!of) return yield* Effect.fail(new TaskRefused({ detail: `--continue ${taskId}: no such task — list them: roster task list --all` }))
    if (of.worker !== worker) {
      return yield* Effect.fail(new TaskRefused({ detail: `--continue ${taskId}: that task is ${of.worker}'s — a worker carries on only its own work` }))
    }
    if (isFinal(of.status) && of.run_ids.length === 0) {
      return yield* Effect.fail(new TaskRefused({ detail: `--continue ${taskId}: that task ended ${of.status} without a run, so there is nothing to carry on` }))
    }
    if (of.archived) return { of, continues: { task_id: null, run_id: of.run_ids.at(-1) ?? null } }
    return { of, continues: { task_id: taskId, run_id: isFinal(of.status) ? of.run_ids.at(-1) ?? null : null } }
  })

const refuse = (e: { readonly message: string }) => new TaskRefused({ detail: e.message })

/**
 * Checks a task before it is written (a known worker, a prompt, a sane ceiling, an `after` that
 * exists) and queues it. The same path for the daemon's API and for the CLI while the daemon
 * is down, so a task is never accepted by one and refused by the other.
 */
export const queueTask = Effect.fn("supervisor.queueTask")(function*(req: TaskRequest, origin: TaskOrigin) {
  yield* validateWorkerName(req.worker).pipe(Effect.mapError(refuse))
  yield* readIdentity(req.worker).pipe(Effect.mapError(refuse))
  if (req.prompt.trim() === "") {
    return yield* Effect.fail(new TaskRefused({ detail: `a task needs a prompt, e.g.: roster task add ${req.worker} "summarise the notes in my store"` }))
  }
  if (req.ceiling_min !== undefined) yield* validateCeiling(req.ceiling_min).pipe(Effect.mapError(refuse))
  if (req.channel !== undefined) yield* validateChannelName(req.channel).pipe(Effect.mapError(refuse))
  if (req.retries !== undefined && !(Number.isInteger(req.retries) && req.retries >= 0 && req.retries <= 20)) {
    return yield* Effect.fail(new TaskRefused({ detail: `--retries ${req.retries}: a whole number from 0 to 20` }))
  }
  const notBefore = req.at === undefined ? undefined : runAt(req.at, yield* Clock.currentTimeMillis)
  if (typeof notBefore === "object") return yield* Effect.fail(new TaskRefused({ detail: notBefore.why }))
  if (req.key !== undefined && !Schema.is(TaskKey)(req.key)) {
    return yield* Effect.fail(new TaskRefused({ detail: `--key ${JSON.stringify(req.key)}: a key is 1 to 128 printable characters, no spaces` }))
  }
  const store = yield* TaskStore
  const carried = req.continue !== undefined ? yield* continuation(req.worker, req.continue) : undefined
  const replyTo = req.reply_to !== undefined ? yield* checkReplyTo(req.reply_to, PERSON_ASKS).pipe(Effect.mapError(refuse)) : undefined
  const before = req.after !== undefined ? yield* namedTask(req.after) : undefined
  if (req.after !== undefined) {
    if (!before) return yield* Effect.fail(new TaskRefused({ detail: `--after ${req.after}: no such task — list them: roster task list --all` }))
    if (before.status === "failed" || before.status === "cancelled") {
      return yield* Effect.fail(new TaskRefused({ detail: `--after ${req.after}: that task ended ${before.status}, so this one could never run` }))
    }
  }
  const added = yield* store.add({
    worker: req.worker,
    prompt: req.prompt,
    ceilingMin: req.ceiling_min ?? null,
    // A continuation of work still to run waits for that run to end, however it ends (dispatch).
    // An archived task is done (one that failed was refused above): nothing to wait for.
    after: before?.archived ? null : req.after ?? null,
    channel: req.channel,
    origin,
    continues: carried?.continues,
    replyTo,
    key: req.key,
    retries: req.retries,
    notBefore
  })
  if (carried && !added.existed && !carried.of.archived) yield* linkContinuation(carried.of.task_id, added.task_id)
  return added
})
/**
 * `roster task retry`: a failed (or cancelled) task back in the queue in its place, as a
 * continuation of its last run when that run had a session; its attempts kept, its answer to be
 * delivered again once it ends.
 */
export const retryTask = Effect.fn("supervisor.retryTask")(function*(taskId: string, resumable: (worker: string, runId: string) => Effect.Effect<boolean, never, HostFiles>) {
  const store = yield* TaskStore
  const t = yield* store.get(taskId)
  if (!t) {
    const archived = yield* store.getArchived(taskId).pipe(archiveUnread(taskId))
    if (!archived) return yield* Effect.fail(new NoSuchTask({ taskId }))
    return yield* Effect.fail(new TaskRefused({
      detail: `task ${taskId} is archived (it ended over [supervisor] keep_days ago): carry it on as a new task — roster task add ${archived.worker} --continue ${taskId} "…"`
    }))
  }
  if (t.status !== "failed" && t.status !== "cancelled") {
    return yield* Effect.fail(new TaskRefused({ detail: `task ${taskId} is ${t.status}: only a failed or cancelled task is tried again` }))
  }
  if (t.unreadable) return yield* Effect.fail(new TaskRefused({ detail: `task ${taskId}'s record is unreadable (${t.unreadable.file}): queue its work again with roster task add` }))
  const last = t.run_ids.at(-1)
  const carries = last !== undefined && (yield* resumable(t.worker, last))
  return yield* store.update(taskId, (x) => {
    if (x.status !== "failed" && x.status !== "cancelled") return x
    const { delivery: _, not_before: __, ...rest } = x
    return { ...rest, status: "queued", reason: null, finished_at: null, ...(carries && last ? { continues: { task_id: x.task_id, run_id: last } } : {}) }
  })
})

/** The origin of a task a person queued (the CLI, the control API). */
export const PERSON: TaskOrigin = { by: "person", run_id: null, task_id: null }

/** A task not yet started is cancelled where it stands (no daemon needed). */
export const cancelQueued = (t: TaskRecord, now: string): TaskRecord =>
  t.status === "queued" || t.status === "held" ? { ...t, status: "cancelled", reason: CANCELLED, finished_at: now } : t

/**
 * A task no live run holds (the daemon is down, or its box is already gone) is cancelled where it
 * stands: a box of this deployment still running for its last run is killed, and the record says cancelled.
 */
export const cancelInPlace = Effect.fn("supervisor.cancelInPlace")(function*(t: TaskRecord) {
  const runId = t.run_ids.at(-1)
  if (t.status === "running" && runId) yield* killRunOrSay(runId, `task ${t.task_id} (cancelled)`)
  return yield* (yield* TaskStore).update(t.task_id, (x, now) =>
    x.status === "running" ? { ...x, status: "cancelled", reason: CANCELLED, finished_at: now } : cancelQueued(x, now))
})
