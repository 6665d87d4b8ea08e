import { FileSystem, Path } from "@effect/platform"
import { Effect, Option } from "effect"
import { isRunId } from "../config/names.js"
import { Paths, layout } from "../config/Paths.js"
import { foldFileLines } from "../fs/lines.js"
import { readRunDir, type RunRecord } from "./RunLog.js"
import { type AuditLine, readAuditLine } from "../contract/auditLine.js"

/** Every run record, newest first; one worker's when given. */
export const listRuns = (worker: Option.Option<string>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const root = layout(yield* Paths).runsDir
    const workers = Option.isSome(worker)
      ? [worker.value]
      : yield* fs.readDirectory(root).pipe(Effect.orElseSucceed(() => [] as Array<string>))
    const out: Array<RunRecord> = []
    for (const w of workers) {
      const ids = yield* fs.readDirectory(path.join(root, w)).pipe(Effect.orElseSucceed(() => [] as Array<string>))
      for (const id of ids.filter(isRunId)) {
        const record = yield* readRunDir(path.join(root, w, id))
        if (record) out.push(record)
        // A damaged run.json is left as it is, and said: never silently missing from the list.
        else if (yield* fs.exists(path.join(root, w, id, "run.json")).pipe(Effect.orElseSucceed(() => false))) {
          yield* Effect.logWarning(`run ${id} of ${w}: its run.json is unreadable (${path.join(root, w, id, "run.json")}) — not listed`)
        }
      }
    }
    // Newest first by when they started: ids have one-second resolution and a random suffix.
    return out.sort((a, b) => b.started_at.localeCompare(a.started_at) || (a.run_id < b.run_id ? 1 : -1))
  })

/** Every run folder as (worker, id), newest first by id (ids begin with their start time): no record read. */
const runDirs = (worker: Option.Option<string>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const root = layout(yield* Paths).runsDir
    const workers = Option.isSome(worker) ? [worker.value] : yield* fs.readDirectory(root).pipe(Effect.orElseSucceed(() => [] as Array<string>))
    const out: Array<{ readonly worker: string; readonly id: string }> = []
    for (const w of workers) {
      for (const id of (yield* fs.readDirectory(`${root}/${w}`).pipe(Effect.orElseSucceed(() => [] as Array<string>))).filter(isRunId)) out.push({ worker: w, id })
    }
    return out.sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))
  })

/** One page of runs, newest first: only that page's records are read, however many runs there are. */
export const pageOfRuns = (offset: number, limit: number, worker: Option.Option<string> = Option.none()) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const root = layout(yield* Paths).runsDir
    const dirs = yield* runDirs(worker)
    const runs: Array<RunRecord> = []
    for (const d of dirs.slice(offset, offset + limit)) {
      const record = yield* readRunDir(path.join(root, d.worker, d.id))
      if (record) runs.push(record)
    }
    return { runs, total: dirs.length }
  })

/** A run by id, looked up by its folder (one stat per worker), not by reading every record. */
export const findRun = (runId: string) =>
  Effect.gen(function*() {
    if (!isRunId(runId)) return undefined
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const root = layout(yield* Paths).runsDir
    for (const w of yield* fs.readDirectory(root).pipe(Effect.orElseSucceed(() => [] as Array<string>))) {
      const dir = path.join(root, w, runId)
      if (yield* fs.exists(dir).pipe(Effect.orElseSucceed(() => false))) return yield* readRunDir(dir)
    }
    return undefined
  })

/**
 * The gateway's audit records of one run (its audit log's <day>.jsonl from the run's first day
 * on): this machine's log, or in a fleet the log of the node that ran it.
 */
export const auditOf = (run: { readonly run_id: string; readonly started_at: string; readonly node?: string | undefined }) =>
  Effect.gen(function*() {
    const { run_id: runId, started_at: startedAt } = run
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const where = layout(yield* Paths)
    const dir = run.node ? where.nodeAuditDir(run.node) : where.auditDir
    const firstDay = startedAt.slice(0, 10)
    const files = (yield* fs.readDirectory(dir).pipe(Effect.orElseSucceed(() => [] as Array<string>)))
      .filter((f) => f.endsWith(".jsonl") && f.slice(0, 10) >= firstDay).sort()
    const out: Array<AuditLine> = []
    // A day's audit holds every run's requests: read it line by line, never whole.
    for (const f of files) {
      yield* foldFileLines(path.join(dir, f), 0, (n, line) => {
        if (!line.includes(runId)) return n
        // A torn last line while the daemon writes is no record: skipped.
        const rec = readAuditLine(line)
        if (rec?.run_id === runId) out.push(rec)
        return n + 1
      }).pipe(Effect.ignore)
    }
    return out
  })
