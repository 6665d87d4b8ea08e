import { Cause, Context, Effect, Exit, Ref, Schema } from "effect"
import { FileSystem, Path } from "@effect/platform"
import { type HostFiles, Paths, layout } from "../config/Paths.js"
import { currentOwner } from "../contract/owner.js"
import { appendJournal } from "../journal/journal.js"
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

/** A run that has no readable run.json (it never started, or its folder is gone). */
export class NoRunRecord extends Schema.TaggedError<NoRunRecord>()("NoRunRecord", {
  worker: Schema.String,
  runId: Schema.String
}) {
  override get message() {
    return `no run record for run ${this.runId} of ${this.worker}`
  }
}

/** Holds a record open: `begin` makes or finds it; the release finishes it from the scope's Exit. */
const holdRecord = <E, R>(
  worker: string,
  runId: string,
  taskId: string | null,
  begin: Effect.Effect<void, E, R>,
  extra: Partial<RunRecord> = {}
) =>
  Effect.gen(function*() {
    const runLog = yield* RunLog
    // The record is this run's: it keeps the deployment it was opened in, whatever its callers provide later.
    const files = Context.pick(Paths, FileSystem.FileSystem, Path.Path)(yield* Effect.context<HostFiles>())
    const runDir = layout(Context.get(files, Paths)).runDir(worker, runId)
    const settled = yield* Ref.make<RunEnd | undefined>(undefined)
    const logFailure = (what: string) => (e: { readonly message: string }) =>
      Effect.logError(`run ${runId}: could not ${what} run.json: ${e.message}`)
    return yield* Effect.acquireRelease(
      begin.pipe(Effect.as({
        runId,
        worker,
        runDir,
        note: (patch) => runLog.update(worker, runId, patch).pipe(Effect.catchAll(logFailure("update")), Effect.provide(files)),
        settle: (end) => Ref.set(settled, end)
      } satisfies OpenRecord)),
      (_, exit) =>
        Ref.get(settled).pipe(
          Effect.map((end) => endFromExit(end, exit)),
          Effect.flatMap((end) => runLog.finish(worker, runId, { ...end, extra: { ...extra, ...end.extra } })),
          Effect.tap((r) => appendJournal(worker, { kind: "run", event: "ended", run_id: runId, task_id: taskId, ended_by: r.ended_by, exit_code: r.exit_code })),
          Effect.catchAll(logFailure("finish"))
        )
    )
  })

/**
 * `run.json` as a resource: started on acquire, finished by the release from however the
 * scope ended, so no path (success, ceiling, error, interrupt at any step) leaves a started
 * record behind. A record that cannot be written is logged; it never hides the run's own end.
 */
export const openRunRecord = (start: RunStart) =>
  holdRecord(
    start.worker,
    start.runId,
    start.taskId ?? null,
    Effect.all([RunLog, currentOwner]).pipe(
      Effect.flatMap(([runLog, owner]) => runLog.start({ owner, ...start })),
      Effect.tap(() => appendJournal(start.worker, { kind: "run", event: "started", run_id: start.runId, task_id: start.taskId ?? null }))
    )
  )

/**
 * A started record whose owner is gone (a daemon killed mid-task, a CLI run killed with -9),
 * held again by the process that adopts or reaps its box; finished the same way, marked adopted.
 */
export const resumeRunRecord = (worker: string, runId: string) =>
  Effect.gen(function*() {
    const record = yield* (yield* RunLog).read(worker, runId)
    if (!record) return yield* Effect.fail(new NoRunRecord({ worker, runId }))
    const open = yield* holdRecord(worker, runId, record.task_id, Effect.void, { adopted: true })
    return { record, open }
  })
