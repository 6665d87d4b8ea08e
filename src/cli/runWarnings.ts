import { Console, Effect } from "effect"
import { RunLog } from "../run/RunLog.js"
import { visible } from "./terminal.js"

/** The warnings the gateway recorded for a run, printed once when the run ends (stderr: stdout stays the run's). */
export const printRunWarnings = (worker: string, runId: string) =>
  Effect.gen(function*() {
    const run = yield* (yield* RunLog).read(worker, runId)
    for (const w of run?.warnings ?? []) yield* Console.error(`warning: ${visible(w)}`)
  })
