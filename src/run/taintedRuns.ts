import { FileSystem } from "@effect/platform"
import { Effect } from "effect"
import { layout, Paths } from "../config/Paths.js"
import { isRunId } from "../config/names.js"
import { isNotFound } from "../fs/notFound.js"

/**
 * The worker's runs that are tainted and not cleared by a person (but `except`, the run asking), whose
 * folders are still there: its other runs are not shown them at /pihome/self/runs — a tainted run's
 * transcript and final words are not a way for its words to reach a clean run. Listed as the taint is
 * written (RunLog); a list that cannot be read hides nothing and is an error, said to the caller.
 */
export const taintedRunsOf = (worker: string, except: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const files = layout(yield* Paths)
    const names = yield* fs.readDirectory(files.taintedRunsDir(worker)).pipe(
      Effect.catchIf(isNotFound, () => Effect.succeed([] as Array<string>))
    )
    const out: Array<string> = []
    for (const id of names.filter(isRunId).sort()) {
      if (id !== except && (yield* fs.exists(files.runDir(worker, id)))) out.push(id)
    }
    return out as ReadonlyArray<string>
  })
