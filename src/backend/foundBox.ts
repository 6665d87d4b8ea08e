import type { Owner } from "../contract/owner.js"

/** A box of this deployment the engine reports, read from its labels. */
export interface FoundBox {
  readonly id: string
  readonly name: string
  readonly runId: string
  readonly worker: string
  readonly kind: string
  readonly taskId: string | null
  /** When its ceiling passes (ms since the epoch); null when the label is missing or unreadable. */
  readonly deadline: number | null
  readonly owner: Owner | null
  readonly created: number
  readonly state: string
  /** The labels name a run and worker roster could have made (else no record can be trusted for it). */
  readonly named: boolean
  /**
   * Made as a warm box (its labels say `warm` for life) and taken by the run whose name it goes by (its
   * name is no longer the one it was made under): its kind, task and deadline are that run's, from the
   * run's record (the supervisor reads it).
   */
  readonly takenWarm?: boolean
}

/** What a box is as people see it at `now`: its run, worker, kind and task, how old, and how long its ceiling has left. */
export const boxFacts = (b: FoundBox, now: number) => ({
  run_id: b.runId,
  worker: b.worker,
  kind: b.kind,
  task_id: b.taskId,
  age_s: Math.max(0, Math.round((now - b.created) / 1000)),
  remaining_s: b.deadline === null ? null : Math.round((b.deadline - now) / 1000)
})
