import type { InterruptedBy } from "../contract/interruption.js"
import type { TaskRecord, TaskStatus } from "../task/TaskRecord.js"

/** Why a cancelled task ended (the same words wherever it was cancelled). */
export const CANCELLED = "cancelled by a person (roster task cancel)"

/** How a task's run ended, as the supervisor learned it (its own run, or an adopted box). */
export interface RunEnded {
  readonly runId: string
  readonly endedBy: string
  readonly exitCode: number | null
  readonly error: string | null
  readonly finalText?: string | null
  readonly ceilingMin?: number | null
}

export const REQUEUE_HINT = "it was not re-run — queue it again: roster task add"

/** A task's last state from its run's end: done only for a clean exit; a cancel requested wins. */
export const taskEnd = (end: RunEnded, cancelRequested: boolean) => {
  const status: TaskStatus = cancelRequested || end.endedBy === "cancelled"
    ? "cancelled"
    : end.endedBy === "exit" && end.exitCode === 0 && !end.error
    ? "done"
    : "failed"
  const reason = status === "done"
    ? null
    : status === "cancelled"
    ? CANCELLED
    : end.error
    ? end.error
    : end.endedBy === "ceiling"
    ? `its ceiling${end.ceilingMin ? ` (${end.ceilingMin} min)` : ""} ended it — give it more with --ceiling, or split the work`
    : end.endedBy === "exit"
    ? `the box exited with code ${end.exitCode ?? "unknown"} — see: roster runs show ${end.runId}`
    : `the run ended by ${end.endedBy} — see: roster runs show ${end.runId}`
  return (t: TaskRecord, now: string): TaskRecord => ({
    ...t,
    status,
    reason,
    finished_at: now,
    ended_by: end.endedBy,
    exit_code: end.exitCode,
    ...(end.finalText !== undefined ? { final_text: end.finalText } : {})
  })
}

/**
 * A task whose run roster itself interrupted (a stop, a crash, a reboot) goes back to the queue,
 * in its place, to carry on as a continuation of that run — its pi session resumed — when the run
 * got as far as having one (its context.json); else it starts over. Its dependants keep waiting.
 */
export const requeueInterrupted = (runId: string, by: InterruptedBy, resumable: boolean) => (t: TaskRecord, now: string): TaskRecord => ({
  ...t,
  status: "queued",
  reason: null,
  finished_at: null,
  interrupted: { run_id: runId, by, at: now },
  ...(resumable ? { continues: { task_id: t.task_id, run_id: runId } } : {})
})

/**
 * A failure no person decided and that another try may not repeat: a failed model call (pi exits
 * 0 with the error recorded), a failed preflight, the engine losing the box or refusing it. A
 * ceiling, a budget stop, a cancel, a fence — or the agent's own non-zero exit — are final.
 */
export const retryable = (end: RunEnded) =>
  end.endedBy === "box-died" || end.endedBy === "error" || (end.endedBy === "exit" && end.error !== null && (end.exitCode === 0 || end.exitCode === 97))

/** The wait before retry `n` (1 = the first): the backoff, doubling, at most an hour. */
export const retryWaitMs = (backoffS: number, n: number) => Math.min(3600, backoffS * 2 ** Math.max(0, n - 1)) * 1000

/** The attempt a run's end adds to its task's record. */
export const attemptOf = (end: RunEnded, at: string, reason: string | null) => ({ run_id: end.runId, ended_by: end.endedBy, at, reason })

/**
 * A failed attempt tried again: back in the queue in its place, not before its backoff has
 * passed, carrying on from the failed run when it had a session.
 */
export const requeueRetry = (end: RunEnded, reason: string, waitMs: number, resumable: boolean) => (t: TaskRecord, now: string): TaskRecord => ({
  ...t,
  status: "queued",
  reason: `attempt ${(t.attempts?.length ?? 0) + 1} failed (${reason}); tried again after ${Math.round(waitMs / 1000)} s`,
  finished_at: null,
  not_before: new Date(Date.parse(now) + waitMs).toISOString(),
  attempts: [...(t.attempts ?? []), attemptOf(end, now, reason)],
  ...(resumable ? { continues: { task_id: t.task_id, run_id: end.runId } } : {})
})

/** Why an interrupted task was not put back (on_interrupt = "fail", or a stop with --fail-running). */
export const interruptedFail = (by: "stop" | "restart") =>
  by === "stop" ? `the daemon stopped while it ran (its box was killed); ${REQUEUE_HINT}` : `the daemon stopped while it ran and its box is gone; ${REQUEUE_HINT}`

/** A task failed before or without a run of its own (the daemon stopped, its box is gone, a dependency failed). */
export const taskFailed = (reason: string) => (t: TaskRecord, now: string): TaskRecord => ({
  ...t,
  status: "failed",
  reason,
  finished_at: now
})
