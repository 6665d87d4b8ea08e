import { Cause, Effect, Exit, Ref } from "effect"
import { causeText } from "./causeText.js"
import { type RunEnd, RunLog, type RunRecord, type RunStart } from "./RunLog.js"

/** A run record held open by a scope: the run notes what it learns; the scope's Exit finishes it. */
export interface OpenRecord {
  readonly runId: string
  readonly worker: string
  readonly runDir: string
  /** Written into run.json now (the container's name, the snapshot's outcome, ...). */
  readonly note: (patch: Partial<RunRecord>) => Effect.Effect<void>
  /** How the run ended as the run itself saw it (exit, ceiling, a session's reason). */
  readonly settle: (end: RunEnd) => Effect.Effect<void>
}

/**
 * How a record is finished from the scope's Exit: what the run settled wins; otherwise an
 * interrupt is `signal` and anything else is `error` with the cause's text. A failure after
 * the run settled (reading its outputs, say) keeps the settled end and records the error.
 */
export const endFromExit = (settled: RunEnd | undefined, exit: Exit.Exit<unknown, unknown>): RunEnd => {
  if (Exit.isSuccess(exit)) return settled ?? { endedBy: "error", exitCode: null, error: "the run ended without an outcome" }
  const interrupted = Cause.isInterruptedOnly(exit.cause)
  if (settled) return interrupted ? settled : { ...settled, error: settled.error ?? causeText(exit.cause) }
  return interrupted ? { endedBy: "signal", exitCode: null } : { endedBy: "error", exitCode: null, error: causeText(exit.cause) }
}

/**
 * `run.json` as a resource: started on acquire, finished by the release from however the
 * scope ended, so no path (success, ceiling, error, interrupt at any step) leaves a started
 * record behind. A record that cannot be written is logged; it never hides the run's own end.
 */
export const openRunRecord = (start: RunStart) =>
  Effect.gen(function*() {
    const runLog = yield* RunLog
    const settled = yield* Ref.make<RunEnd | undefined>(undefined)
    const runDir = runLog.runDir(start.worker, start.runId)
    const logFailure = (what: string) => (e: { readonly message: string }) =>
      Effect.logError(`run ${start.runId}: could not ${what} run.json: ${e.message}`)
    return yield* Effect.acquireRelease(
      runLog.start(start).pipe(Effect.as({
        runId: start.runId,
        worker: start.worker,
        runDir,
        note: (patch) => runLog.update(start.worker, start.runId, patch).pipe(Effect.catchAll(logFailure("update"))),
        settle: (end) => Ref.set(settled, end)
      } satisfies OpenRecord)),
      (_, exit) =>
        Ref.get(settled).pipe(
          Effect.flatMap((end) => runLog.finish(start.worker, start.runId, endFromExit(end, exit))),
          Effect.catchAll(logFailure("finish"))
        )
    )
  })
