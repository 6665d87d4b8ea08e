import { FileSystem, Path } from "@effect/platform"
import { Effect, Option } from "effect"
import { isRunId } from "../config/names.js"
import { Paths, layout } from "../config/Paths.js"
import { foldFileLines } from "../fs/lines.js"
import { readRunDir, type RunRecord } from "../run/RunLog.js"

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
      }
    }
    // Newest first by when they started: ids have one-second resolution and a random suffix.
    return out.sort((a, b) => b.started_at.localeCompare(a.started_at) || (a.run_id < b.run_id ? 1 : -1))
  })

export const findRun = (runId: string) =>
  listRuns(Option.none()).pipe(Effect.map((runs) => runs.find((r) => r.run_id === runId)))

/** The gateway's audit records of one run (state/audit/<day>.jsonl from the run's first day on). */
export const auditOf = (runId: string, startedAt: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const dir = layout(yield* Paths).auditDir
    const firstDay = startedAt.slice(0, 10)
    const files = (yield* fs.readDirectory(dir).pipe(Effect.orElseSucceed(() => [] as Array<string>)))
      .filter((f) => f.endsWith(".jsonl") && f.slice(0, 10) >= firstDay).sort()
    const out: Array<Record<string, unknown>> = []
    // A day's audit holds every run's requests: read it line by line, never whole.
    for (const f of files) {
      yield* foldFileLines(path.join(dir, f), 0, (n, line) => {
        if (!line.includes(runId)) return n
        try {
          const rec = JSON.parse(line) as Record<string, unknown>
          if (rec.run_id === runId) out.push(rec)
        } catch {
          // a torn last line while the daemon writes: skip it
        }
        return n + 1
      }).pipe(Effect.ignore)
    }
    return out
  })
