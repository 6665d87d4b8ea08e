import { Console, Effect } from "effect"
import { RunLog } from "./RunLog.js"
import { visible } from "../report/terminal.js"

/** The warnings the gateway recorded for a run, printed once when the run ends (stderr: stdout stays the run's). */
export const printRunWarnings = (worker: string, runId: string) =>
  Effect.gen(function*() {
    const run = yield* (yield* RunLog).read(worker, runId)
    for (const w of run?.warnings ?? []) yield* Console.error(`warning: ${visible(w)}`)
  })
