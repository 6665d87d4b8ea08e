import { FileSystem, Path } from "@effect/platform"
import { Effect, Option } from "effect"
import { isRunId } from "../config/names.js"
import { Paths, layout } from "../config/Paths.js"
import { foldFileLines, LINE_MAX } from "../fs/lines.js"
import { readRunDir, type RunRecord } from "./RunLog.js"
import { RunIndex, type RunRef } from "./RunIndex.js"
import { AuditIndex } from "./AuditIndex.js"
import { type TaintEvent, TaintLog } from "./TaintLog.js"
import { type AuditLine, readAuditLine } from "../contract/auditLine.js"
import { namesIn } from "../fs/namesIn.js"
import { readOr } from "../fs/notFound.js"

/** Every run folder as (worker, id), newest first by id (ids begin with their start time): no record read. */
export const runDirs = (worker: Option.Option<string>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const root = layout(yield* Paths).runsDir
    const workers = Option.isSome(worker) ? [worker.value] : yield* namesIn(fs, root, "the runs")
    const out: Array<RunRef> = []
    for (const w of workers) {
      for (const id of (yield* namesIn(fs, `${root}/${w}`, `the runs of ${w}`)).filter(isRunId)) out.push({ worker: w, run_id: id })
    }
    return out.sort((a, b) => (a.run_id < b.run_id ? 1 : a.run_id > b.run_id ? -1 : 0))
  })

/**
 * One page of runs, newest first, from the run index (a fleet's table) or else the folders: only
 * that page's records are read, however many runs there are. A damaged run.json is left as it is,
 * and said: never silently missing from the page.
 */
export const pageOfRuns = (offset: number, limit: number, worker: Option.Option<string> = Option.none()) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const root = layout(yield* Paths).runsDir
    const indexed = yield* (yield* RunIndex).page(offset, limit, worker)
    const { refs, total } = Option.isSome(indexed)
      ? indexed.value
      : yield* Effect.map(runDirs(worker), (dirs) => ({ refs: dirs.slice(offset, offset + limit), total: dirs.length }))
    const taints = yield* sharedTaints(refs.map((r) => r.run_id))
    const runs: Array<RunRecord> = []
    for (const d of refs) {
      const dir = path.join(root, d.worker, d.run_id)
      const record = yield* readRunDir(dir, taints.get(d.run_id))
      if (record) runs.push(record)
      // A run.json that cannot even be looked at is left out like a run still being made; one that is there and unreadable is said.
      else if (yield* fs.exists(path.join(dir, "run.json")).pipe(Effect.orElseSucceed(() => false))) {
        yield* Effect.logWarning(`run ${d.run_id} of ${d.worker}: its run.json is unreadable (${path.join(dir, "run.json")}) — not listed`)
      }
    }
    return { runs, total }
  })

/** A run by id: the worker from the run index, else its folder looked up (one stat per worker), never every record read. */
export const findRun = (runId: string) =>
  Effect.gen(function*() {
    if (!isRunId(runId)) return undefined
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const root = layout(yield* Paths).runsDir
    const taints = (yield* sharedTaints([runId])).get(runId)
    const indexed = yield* (yield* RunIndex).workerOf(runId)
    if (Option.isSome(indexed)) {
      const record = yield* readRunDir(path.join(root, indexed.value, runId), taints)
      if (record) return record
    }
    for (const w of yield* namesIn(fs, root, "the runs")) {
      const dir = path.join(root, w, runId)
      // A folder that cannot be looked at is not taken for the run: the next worker's is tried, and none found is the caller's "no such run".
      if (yield* fs.exists(dir).pipe(Effect.orElseSucceed(() => false))) return yield* readRunDir(dir, taints)
    }
    return undefined
  })

/** A fleet's taints and untaints of the runs shown (one query a page); shown without them, and said, when its database does not answer. */
const sharedTaints = (runIds: ReadonlyArray<string>) =>
  Effect.flatMap(TaintLog, (log) => log.of(runIds)).pipe(
    Effect.catchAll((e) =>
      Effect.logWarning(`runs shown without the fleet's taints: ${e.message}`).pipe(Effect.as(new Map<string, ReadonlyArray<TaintEvent>>()))
    )
  )

/** The day (YYYY-MM-DD) after an ISO time's. */
const nextDay = (iso: string) => new Date(Date.parse(`${iso.slice(0, 10)}T00:00:00.000Z`) + 86_400_000).toISOString().slice(0, 10)

/**
 * The gateway's audit records of one run: this machine's log, or in a fleet the log of the node
 * that ran it. Its day files (`<day>.jsonl`) from the run's first day to the day after it ended
 * (a tunnel's line is written when it closes, which can be past midnight), each from where the
 * audit index says the run's first line is when it knows, else from the start.
 */
export const auditOf = (run: {
  readonly run_id: string
  readonly started_at: string
  readonly finished_at?: string | null
  readonly node?: string | undefined
}) =>
  Effect.gen(function*() {
    const { run_id: runId, started_at: startedAt } = run
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const where = layout(yield* Paths)
    const dir = run.node ? where.nodeAuditDir(run.node) : where.auditDir
    const indexed = yield* (yield* AuditIndex).of(runId)
    const starts = new Map(Option.isSome(indexed) ? indexed.value.map((s) => [`${s.day}.jsonl`, s.offset]) : [])
    const firstDay = Option.isSome(indexed) && indexed.value[0] ? indexed.value[0].day : startedAt.slice(0, 10)
    const lastDay = run.finished_at ? nextDay(run.finished_at) : "9999-12-31"
    const files = (yield* namesIn(fs, dir, "the audit log"))
      .filter((f) => f.endsWith(".jsonl") && f.slice(0, 10) >= firstDay && f.slice(0, 10) <= lastDay).sort()
    const out: Array<AuditLine> = []
    // A day's audit holds every run's requests: read it line by line, never whole.
    for (const f of files) {
      yield* foldFileLines(path.join(dir, f), 0, (n, line) => {
        if (!line.includes(runId)) return n
        // A torn last line while the daemon writes is no record: skipped.
        const rec = readAuditLine(line)
        if (rec?.run_id === runId) out.push(rec)
        return n + 1
        // The run's requests from the days that could be read; one that could not is said (readOr).
      }, LINE_MAX, starts.get(f) ?? 0).pipe(readOr(path.join(dir, f), 0))
    }
    return out
  })
