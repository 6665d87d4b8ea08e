import { Context, Effect, Layer, type Option } from "effect"

/** Where a run's gateway requests begin in one day's file of its node's audit log, and how many there are in it. */
export interface AuditStart {
  readonly run_id: string
  readonly node: string
  /** The day file (`<day>.jsonl`). */
  readonly day: string
  /** The byte offset of the run's first line in that file. */
  readonly offset: number
  readonly requests: number
}

/**
 * Where each run's lines are in the gateway's audit log, so `runs show` reads from the run's first
 * request on rather than every line of every day since it started: under `[cluster]` a table of
 * the fleet's database (each node's log is in the shared folder, read by every node). The log
 * stays the truth: a run the index does not know is read the long way.
 */
export class AuditIndex extends Context.Tag("roster/AuditIndex")<AuditIndex, {
  /** Adds what the gateway wrote since it last said (a start keeps the lowest offset, requests add up). */
  readonly put: (starts: ReadonlyArray<AuditStart>) => Effect.Effect<void, unknown>
  /** A run's days in the index, oldest first; none when there is no index, it does not know the run or does not answer. */
  readonly of: (runId: string) => Effect.Effect<Option.Option<ReadonlyArray<AuditStart>>>
}>() {
  static readonly layerNone = Layer.succeed(AuditIndex, {
    put: () => Effect.void,
    of: () => Effect.succeedNone
  })
}
