import { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Layer, Option, Ref, Schedule, Scope } from "effect"
import { answerWithin } from "../contract/answerWithin.js"
import { Paths, layout } from "../config/Paths.js"
import { runDirs } from "../run/query.js"
import { type IndexedRun, RunIndex, type RunRef } from "../run/RunIndex.js"
import { readRunJson } from "../run/RunLog.js"
import { FleetSqlOnDemand } from "./firstUse.js"
import { sqlDetail } from "./sqlDetail.js"
import { logDefects } from "../report/defects.js"

/**
 * The fleet's run index over a database client. A write the database does not take (an outage)
 * is kept, newest per run, and written again every few seconds and once more as the process ends;
 * a daemon's start also fills in what its node's runs left unwritten ({@link indexRunsOf}).
 */
export const runIndexOver = (sql: SqlClient) =>
  Effect.gen(function*() {
    const unwritten = new Map<string, IndexedRun>()
    const warned = yield* Ref.make(false)
    const upsert = (r: IndexedRun) =>
      sql`INSERT INTO roster_runs (run_id, worker, kind, task_id, node, started_at, finished_at, ended_by)
        VALUES (${r.run_id}, ${r.worker}, ${r.kind}, ${r.task_id}, ${r.node ?? null}, ${new Date(r.started_at)},
          ${r.finished_at === null ? null : new Date(r.finished_at)}, ${r.ended_by})
        ON CONFLICT (run_id) DO UPDATE SET
          finished_at = coalesce(EXCLUDED.finished_at, roster_runs.finished_at),
          ended_by = coalesce(EXCLUDED.ended_by, roster_runs.ended_by)`.pipe(
        // Only if nothing newer of this run was queued meanwhile.
        Effect.tap(() => Effect.sync(() => unwritten.get(r.run_id) === r && unwritten.delete(r.run_id)))
      )
    const flush = Effect.suspend(() => Effect.forEach([...unwritten.values()], upsert, { discard: true }))
    const kept = (detail: string) =>
      Ref.getAndSet(warned, true).pipe(Effect.flatMap((was) =>
        was ? Effect.void : Effect.logWarning(
          `fleet: the run index cannot be written (${detail}); the runs are in their folders, and are indexed when the database answers`
        )))
    // Interruptible even when the index is first made inside a run's acquire (uninterruptible, as
    // a fork inherits it): a loop that cannot be interrupted would hold the process open at exit.
    yield* Effect.forkScoped(Effect.interruptible(flush.pipe(
      Effect.tap(() => Ref.set(warned, false)),
      // What could not be written stays in `unwritten` for the next pass, and `kept` said so once.
      Effect.ignore,
      logDefects("fleet: unexpected failure writing the run index (tried again in 5 s)"),
      Effect.repeat(Schedule.spaced("5 seconds"))
    )))
    yield* Effect.addFinalizer(() =>
      flush.pipe(
        answerWithin("2 seconds", () => new Error("no answer in 2 s")),
        Effect.catchAllCause((c) => Effect.logWarning("fleet: the run index's last rows were not written as the daemon closed; the node's next daemon start fills them in from the runs folder", c))
      ))
    const byWorker = (worker: Option.Option<string>) => (Option.isSome(worker) ? sql`WHERE worker = ${worker.value}` : sql``)
    return RunIndex.of({
      put: (run) =>
        Effect.suspend(() => {
          unwritten.set(run.run_id, run)
          // A database slow to answer delays no run by more than a moment: the loop writes it later.
          return upsert(run).pipe(
            answerWithin("2 seconds", () => new Error("no answer in 2 s")),
            Effect.catchAll((e) => kept(e instanceof Error ? e.message : sqlDetail(e)))
          )
        }),
      page: (offset, limit, worker) =>
        Effect.all([
          sql<RunRef>`SELECT worker, run_id FROM roster_runs ${byWorker(worker)} ORDER BY run_id DESC OFFSET ${offset} LIMIT ${limit}`.withoutTransform,
          sql<{ readonly n: number }>`SELECT count(*)::int AS n FROM roster_runs ${byWorker(worker)}`.withoutTransform
        ]).pipe(
          Effect.map(([refs, count]) => Option.some({ refs, total: count[0]?.n ?? 0 })),
          // The folders are the truth: a reader the database does not answer lists them instead.
          Effect.catchAll(() => Effect.succeedNone)
        ),
      workerOf: (runId) =>
        sql<{ readonly worker: string }>`SELECT worker FROM roster_runs WHERE run_id = ${runId}`.withoutTransform.pipe(
          Effect.map((rows) => Option.fromNullable(rows[0]?.worker)),
          Effect.catchAll(() => Effect.succeedNone)
        )
    })
  })

/** The fleet's run index on the daemon's own connection. */
export const fleetRunIndex = Layer.scoped(RunIndex, Effect.flatMap(SqlClient, runIndexOver))

/**
 * The fleet's run index for a process that is not its daemon (a `worker run`, `runs list`,
 * `roster web`): on the process's shared connection, made on first use. A database that cannot be
 * had leaves the runs unindexed (said) and the readers on the folders.
 */
export const fleetRunIndexOnDemand = Layer.scoped(
  RunIndex,
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const connected = yield* FleetSqlOnDemand
    const index = yield* Effect.cached(Effect.flatMap(connected, (c) => Scope.extend(runIndexOver(c.sql), scope)))
    return RunIndex.of({
      put: (run) =>
        index.pipe(
          Effect.flatMap((i) => i.put(run)),
          Effect.catchAll((e) =>
            Effect.logWarning(`fleet: run ${run.run_id} is not in the fleet's run index (${e.detail}); its node's daemon indexes it when it next starts`))
        ),
      // The index is a shortcut: none makes the callers read the runs folder instead (runs list, runs show).
      page: (offset, limit, worker) => index.pipe(Effect.flatMap((i) => i.page(offset, limit, worker)), Effect.orElseSucceed(() => Option.none())),
      workerOf: (runId) => index.pipe(Effect.flatMap((i) => i.workerOf(runId)), Effect.orElseSucceed(() => Option.none()))
    })
  })
)

/**
 * Indexes what this node's runs left unindexed (written while the database was down, by a
 * process that ended before it was back, or before the index existed): every run folder the index
 * lacks, or holds as running when its record has ended. Only run.json files the index does not
 * know are read; the rest costs the folder listing.
 */
export const indexRunsOf = (node: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient
    const index = yield* RunIndex
    const where = layout(yield* Paths)
    const rows = yield* sql<{ readonly run_id: string; readonly done: boolean }>`
      SELECT run_id, finished_at IS NOT NULL AS done FROM roster_runs`.withoutTransform
    const known = new Map(rows.map((r) => [r.run_id, r.done]))
    let added = 0
    for (const ref of yield* runDirs(Option.none())) {
      if (known.get(ref.run_id) === true) continue
      // A run whose run.json cannot be read is not indexed now: runs list says it (query.ts), and the next start tries again.
      const record = yield* readRunJson(where.runDir(ref.worker, ref.run_id)).pipe(Effect.orElseSucceed(() => Option.none()))
      if (Option.isNone(record) || record.value.node !== node) continue
      if (known.has(ref.run_id) && record.value.finished_at === null) continue
      yield* index.put(record.value)
      added++
    }
    if (added > 0) yield* Effect.logInfo(`fleet: ${added} of this node's runs put into the run index`)
    return added
  })
