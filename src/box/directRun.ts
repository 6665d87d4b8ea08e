import { Console, Effect } from "effect"
import { Paths, layout } from "../config/Paths.js"
import { runFiles } from "../contract/runFiles.js"
import { tailOfFile } from "../fs/tail.js"
import { visible } from "../report/terminal.js"
import { newRunId } from "../run/runId.js"
import { RunLog } from "../run/RunLog.js"
import { printRunWarnings } from "../run/runWarnings.js"
import { liveLine } from "./liveLine.js"
import { cliExitCode, runOnce } from "./runOnce.js"
import type { TakenWarm } from "./warmBox.js"

/** `roster worker run`'s arguments. */
export interface DirectRun {
  readonly worker: string
  readonly prompt: string
  readonly ceilingMin?: number
  readonly channel: string | null
}

/** Where the person watching sees the run: stdout's live lines (the rest goes through Console). */
export interface DirectRunView {
  readonly say: (text: string) => Effect.Effect<void>
  readonly colour: boolean
}

/** The two lines every ending prints, for a run ended by a signal (read from its finished record). */
const closingLinesOfInterrupted = (worker: string, runId: string) =>
  Effect.gen(function*() {
    const record = yield* (yield* RunLog).read(worker, runId)
    if (!record) return
    yield* Console.log(`box ${runId} ended by ${record.ended_by ?? "signal"} (exit code ${record.exit_code ?? "none"})`)
    yield* Console.log(`outputs: ${layout(yield* Paths).runDir(worker, runId)}`)
  // The closing lines of a run the signal ended: its record says the rest; a record that cannot be read leaves only them out.
  }).pipe(Effect.ignore)

/**
 * A person's one-shot run, as `roster worker run` shows it: the live lines while the box works,
 * then its messages, the gateway's warnings, why it failed and the end of its stderr, how it
 * ended and where its outputs are. The same lines whether the CLI runs it or the daemon runs it
 * for a CLI that handed it over; the exit code the CLI exits with.
 */
export const directRun = Effect.fn("box.directRun")(function*(req: DirectRun, view: DirectRunView, warm?: TakenWarm) {
  const runId = warm?.runId ?? (yield* newRunId)
  const outcome = yield* runOnce({
    worker: req.worker,
    prompt: req.prompt,
    ...(req.ceilingMin !== undefined ? { ceilingMin: req.ceilingMin } : {}),
    channel: req.channel,
    origin: { _tag: "person", via: "cli" },
    runId,
    onLine: liveLine(req.worker, view.say, view.colour)
  }, warm).pipe(
    // Ctrl-C / SIGTERM: the run's scope has killed the box and finished its record by now; its closing lines are still said.
    Effect.onInterrupt(() => closingLinesOfInterrupted(req.worker, runId))
  )
  for (const m of outcome.messages) yield* Console.log(`message from ${req.worker}: ${visible(m)}`)
  yield* printRunWarnings(req.worker, outcome.runId)
  if (outcome.error) yield* Console.error(`the run failed: ${visible(outcome.error)}`)
  if (outcome.error || (outcome.endedBy === "exit" && outcome.exitCode !== 0)) {
    const log = runFiles(outcome.runDir).stderr
    const tail = (yield* tailOfFile(log, 10)).split("\n").map((l) => (l.length > 400 ? `${l.slice(0, 400)}…` : l)).join("\n")
    if (tail !== "") yield* Console.error(`the box's stderr (last lines; all of it in ${log}):\n${visible(tail)}`)
  }
  yield* Console.log(`box ${outcome.runId} ended by ${outcome.endedBy} (exit code ${outcome.exitCode ?? "none"})`)
  yield* Console.log(`outputs: ${outcome.runDir}`)
  return cliExitCode(outcome)
})
