import { FileSystem, Path } from "@effect/platform"
import { Effect, Option, Schema } from "effect"
import { isRunId } from "../config/names.js"
import { Paths, layout } from "../config/Paths.js"
import { readJsonOptional } from "../fs/files.js"
import { RunRecord } from "../run/RunLog.js"

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
        const decoded = Schema.decodeUnknownOption(RunRecord)(yield* readJsonOptional(path.join(root, w, id, "run.json")))
        if (Option.isSome(decoded)) out.push(decoded.value)
      }
    }
    return out.sort((a, b) => (a.run_id < b.run_id ? 1 : -1))
  })

export const findRun = (runId: string) =>
  listRuns(Option.none()).pipe(Effect.map((runs) => runs.find((r) => r.run_id === runId)))
