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

/** A task failed before or without a run of its own (the daemon stopped, its box is gone, a dependency failed). */
export const taskFailed = (reason: string) => (t: TaskRecord, now: string): TaskRecord => ({
  ...t,
  status: "failed",
  reason,
  finished_at: now
})
