import type { RunCaller } from "../base/identify.js"

/** What an action answers: a status and a JSON body. */
export interface ActionAnswer {
  readonly status: number
  readonly body: unknown
}

/** A box's caller: a token that names a run and a worker (host callers have no box actions). */
export type BoxCaller = RunCaller
