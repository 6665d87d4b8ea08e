import { type Context, Effect } from "effect"
import type { RunEvent } from "../../run/events.js"
import { RunLog } from "../../run/RunLog.js"
import type { LedgerEntry, SpendLedger } from "../../spend/SpendLedger.js"

/** What a model answer leaves once it has passed: its ledger line and its run's `usage` event, then what follows it (a budget's stop). */
export interface UsageNote<R> {
  readonly entry: LedgerEntry | undefined
  readonly then: Effect.Effect<void, never, R> | undefined
}

const usageEvent = (e: LedgerEntry): RunEvent => ({
  kind: "usage", model: e.model, input: e.input, output: e.output, cache_read: e.cache_read, cache_write: e.cache_write, usd: e.usd
})

/**
 * Model answers' notes, written after them a moment's worth at a time: the ledger lines to its
 * open day file, each run's `usage` events in one append (one open and close for all the answers
 * of the moment, not one each: ~8 % of a model call's CPU under load), then each note's `then` in
 * the order given, so a run's stop follows the usage that crossed its budget. `submit` needs no
 * fiber (an answer's relay ends in a callback); one fiber in the gateway's scope writes what has
 * gathered. The answer was counted in memory as it ended (`SpendLedger.count`), so its run's next
 * call is checked against it whenever this writes.
 */
export const makeUsageNotes = <R>(
  ledger: Context.Tag.Service<SpendLedger>,
  fork: (work: Effect.Effect<void, never, R | RunLog>) => void
) => {
  let pending: Array<UsageNote<R>> = []
  let scheduled = false
  const writeBatch = (batch: ReadonlyArray<UsageNote<R>>) =>
    Effect.gen(function*() {
      const runLog = yield* RunLog
      const byRun = new Map<string, { readonly worker: string; readonly runId: string; readonly events: Array<RunEvent> }>()
      for (const { entry } of batch) {
        if (!entry) continue
        yield* ledger.persist(entry)
        const run = byRun.get(entry.run_id) ?? { worker: entry.worker, runId: entry.run_id, events: [] }
        run.events.push(usageEvent(entry))
        byRun.set(entry.run_id, run)
      }
      for (const { events, runId, worker } of byRun.values()) {
        yield* runLog.appendAll(worker, runId, events).pipe(
          Effect.catchAll((e) => Effect.logWarning(`gateway: run ${runId}: its usage could not be noted: ${e.message}`))
        )
      }
      for (const { then } of batch) if (then) yield* then
    })
  // What arrives while a batch is written is the next batch, written by the same fiber.
  const write = Effect.gen(function*() {
    while (pending.length > 0) {
      const batch = pending
      pending = []
      yield* writeBatch(batch)
    }
  }).pipe(Effect.ensuring(Effect.sync(() => (scheduled = false))))
  return {
    submit: (note: UsageNote<R>) => {
      if (!note.entry && !note.then) return
      pending.push(note)
      if (scheduled) return
      scheduled = true
      fork(write)
    }
  }
}

export type UsageNotes<R> = ReturnType<typeof makeUsageNotes<R>>
