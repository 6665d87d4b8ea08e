import { FileSystem, Path } from "@effect/platform"
import { Effect, Schema } from "effect"
import { RunId, WorkerName } from "../../config/names.js"
import { Paths, layout } from "../../config/Paths.js"
import { Files } from "../../fs/Files.js"

/** One model answer in the ledger: whose, which model, its tokens and estimated cost. */
export const LedgerEntry = Schema.Struct({
  time: Schema.String,
  run_id: RunId,
  worker: WorkerName,
  model: Schema.String,
  input: Schema.Number,
  output: Schema.Number,
  cache_read: Schema.Number,
  cache_write: Schema.Number,
  usd: Schema.Number,
  /** false: the model had no price, so it was priced as the dearest. */
  priced: Schema.Boolean
})
export type LedgerEntry = typeof LedgerEntry.Type

/** What has been spent, as the budgets read it. */
export interface Spent {
  readonly runUsd: number
  readonly runTokens: number
  readonly workerDayUsd: number
  readonly orgDayUsd: number
}

/** How far back the ledger is read at start: a run's spending counts across days, a run lasts less than this. */
const DAYS_KEPT_IN_MEMORY = 7
const decodeLine = Schema.decodeUnknownOption(Schema.parseJson(LedgerEntry))
const dayOf = (iso: string) => iso.slice(0, 10)

/**
 * The spend ledger: state/ledger/<UTC day>.jsonl, one line per model answer, appended as each
 * answer ends; the sums the budgets check are kept in memory, rebuilt from the files when the
 * gateway starts — a daemon restart forgets nothing that was written.
 */
export const makeLedger = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const dir = layout(yield* Paths).ledgerDir
  const runs = new Map<string, { usd: number; tokens: number }>()
  const stopped = new Set<string>()
  const days = new Map<string, { org: number; workers: Map<string, number> }>()

  const add = (e: LedgerEntry) => {
    const run = runs.get(e.run_id) ?? { usd: 0, tokens: 0 }
    runs.set(e.run_id, { usd: run.usd + e.usd, tokens: run.tokens + e.input + e.output + e.cache_read + e.cache_write })
    const day = days.get(dayOf(e.time)) ?? { org: 0, workers: new Map<string, number>() }
    day.org += e.usd
    day.workers.set(e.worker, (day.workers.get(e.worker) ?? 0) + e.usd)
    days.set(dayOf(e.time), day)
  }

  const files = (yield* fs.readDirectory(dir).pipe(Effect.orElseSucceed(() => [] as Array<string>)))
    .filter((f) => /^\d{4}-\d{2}-\d{2}\.jsonl$/.test(f)).sort().slice(-DAYS_KEPT_IN_MEMORY)
  for (const f of files) {
    const text = yield* fs.readFileString(path.join(dir, f)).pipe(Effect.orElseSucceed(() => ""))
    for (const line of text.split("\n")) {
      const e = decodeLine(line)
      if (e._tag === "Some") add(e.value)
    }
  }

  return {
    /** True the first time a run is stopped for its budget (this gateway's lifetime): stop it once. */
    stopOnce: (runId: string) => !stopped.has(runId) && stopped.add(runId).size > 0,
    /** Spent so far by this run, and today (UTC) by its worker and the org. */
    spent: (worker: string, runId: string, nowIso: string): Spent => {
      const run = runs.get(runId)
      const day = days.get(dayOf(nowIso))
      return { runUsd: run?.usd ?? 0, runTokens: run?.tokens ?? 0, workerDayUsd: day?.workers.get(worker) ?? 0, orgDayUsd: day?.org ?? 0 }
    },
    /** Counts an answer in memory, at once: the next call is checked against it, whatever the disk does. */
    count: add,
    /** Writes a counted answer to the day's file (a write that fails is logged; the sum still counts). */
    persist: (e: LedgerEntry) =>
      Effect.gen(function*() {
        const file = path.join(dir, `${dayOf(e.time)}.jsonl`)
        const line = `${JSON.stringify(e)}\n`
        const appendTo = (yield* Files).append
        yield* appendTo(file, line, 0o600).pipe(
          Effect.catchTag("SystemError", (err) =>
            err.reason === "NotFound"
              ? fs.makeDirectory(dir, { recursive: true, mode: 0o700 }).pipe(Effect.zipRight(appendTo(file, line, 0o600)))
              : Effect.fail(err)),
          Effect.catchAll((err) => Effect.logError(`gateway: the spend ledger cannot be written (${file}): ${err.message}`))
        )
      })
  }
})
export type Ledger = Effect.Effect.Success<typeof makeLedger>
