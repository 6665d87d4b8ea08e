import { Deferred, Effect, FiberId, Option } from "effect"
import { PREFLIGHT_WAIT_MS, type PreflightResult } from "../../contract/preflight.js"

/** One run's preflight: its result once in, and when waiting for it ends. */
export interface PreflightEntry {
  readonly result: Deferred.Deferred<PreflightResult>
  /** The first moment this gateway heard from the run, plus the wait (ms since the epoch). */
  readonly deadline: number
}

/**
 * Each run's preflight as this gateway knows it, from the first time it hears from the run
 * (the box's report, or a request the box sends while pi starts beside the check). In memory:
 * the run record holds the decision too, so an entry dropped here (or a daemon restarted) is
 * found again there.
 */
export const makePreflights = () => {
  const runs = new Map<string, PreflightEntry>()
  // Decided entries' results, read without a wait: every request of a run asks.
  const settled = new WeakMap<PreflightEntry, PreflightResult>()
  return {
    /** The run's entry, made now when this is the first the gateway hears of it (`fresh`). */
    entry: (runId: string, now: number) =>
      Effect.sync(() => {
        const known = runs.get(runId)
        if (known) return { entry: known, fresh: false }
        if (runs.size >= 10_000) for (const [id, e] of runs) if (settled.has(e)) runs.delete(id)
        const entry: PreflightEntry = { result: Deferred.unsafeMake<PreflightResult>(FiberId.none), deadline: now + PREFLIGHT_WAIT_MS }
        runs.set(runId, entry)
        return { entry, fresh: true }
      }),
    /** Decides the run's preflight: true when this decided it (the first result wins). */
    settle: (entry: PreflightEntry, result: PreflightResult) =>
      Deferred.succeed(entry.result, result).pipe(Effect.tap((first) => first && Effect.sync(() => settled.set(entry, result)))),
    /** The result, waited for until the entry's deadline (None: nothing came in time); at once when decided. */
    result: (entry: PreflightEntry, now: number) =>
      Effect.suspend(() => {
        const decided = settled.get(entry)
        return decided ? Effect.succeed(Option.some(decided)) : Deferred.await(entry.result).pipe(Effect.timeoutOption(Math.max(0, entry.deadline - now)))
      })
  }
}
export type Preflights = ReturnType<typeof makePreflights>
