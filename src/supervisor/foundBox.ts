import { isRunId, isWorkerName } from "../config/names.js"
import * as C from "../contract/constants.js"
import type { Owner } from "../contract/owner.js"
import type { ContainerSummary } from "../docker/Docker.js"

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
}

const number = (text: string | undefined) => {
  const n = Number(text)
  return text !== undefined && text !== "" && Number.isFinite(n) ? n : null
}

export const foundBox = (c: ContainerSummary): FoundBox => {
  const runId = c.labels[C.LABEL_RUN_ID] ?? ""
  const worker = c.labels[C.LABEL_WORKER] ?? ""
  const pid = number(c.labels[C.LABEL_OWNER_PID])
  return {
    id: c.id,
    name: (c.names[0] ?? "").replace(/^\//, ""),
    runId,
    worker,
    kind: c.labels[C.LABEL_KIND] ?? "",
    taskId: c.labels[C.LABEL_TASK_ID] || null,
    deadline: number(c.labels[C.LABEL_DEADLINE]),
    owner: pid === null ? null : { pid, start: c.labels[C.LABEL_OWNER_START] ?? "" },
    created: c.created,
    state: c.state,
    named: isRunId(runId) && isWorkerName(worker)
  }
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
