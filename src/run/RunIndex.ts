import { Context, Effect, Layer, type Option } from "effect"

/** Where a run's folder is: `runs/<worker>/<run_id>`. */
export interface RunRef {
  readonly worker: string
  readonly run_id: string
}

/** What the index holds of a run record: what a list is sorted and filtered by, and how it ended. */
export interface IndexedRun extends RunRef {
  readonly kind: string
  readonly task_id: string | null
  readonly node?: string | undefined
  readonly started_at: string
  readonly finished_at: string | null
  readonly ended_by: string | null
}

/** A page of runs, newest first, and how many there are in all. */
export interface RunRefPage {
  readonly refs: ReadonlyArray<RunRef>
  readonly total: number
}

/**
 * Which runs there are, without listing the run folders: under `[cluster]` a table of the fleet's
 * database (a shared folder over NFS lists slowly, and holds every node's runs). The folders stay
 * the truth: a run is indexed when it starts and when it ends, a write the index could not take
 * never fails the run, and a reader the index does not answer lists the folders instead.
 */
export class RunIndex extends Context.Tag("roster/RunIndex")<RunIndex, {
  /** Says a run started or ended (its record as written). Never fails: what cannot be written is said and kept for later. */
  readonly put: (run: IndexedRun) => Effect.Effect<void>
  /** One page, newest first; none when there is no index or it does not answer (read the folders). */
  readonly page: (offset: number, limit: number, worker: Option.Option<string>) => Effect.Effect<Option.Option<RunRefPage>>
  /** Whose run an id is, when the index knows it. */
  readonly workerOf: (runId: string) => Effect.Effect<Option.Option<string>>
}>() {
  /** A machine on its own: its run folders are on its own disk, and listing them is the index. */
  static readonly layerNone = Layer.succeed(RunIndex, {
    put: () => Effect.void,
    page: () => Effect.succeedNone,
    workerOf: () => Effect.succeedNone
  })
}
