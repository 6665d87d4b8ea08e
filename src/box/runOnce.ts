import { Clock, Duration, Effect, Ref, Schema } from "effect"
import { readEvent, worthReading } from "../contract/piEvents.js"
import { runFiles } from "../contract/runFiles.js"
import { emptySummary, summaryStep } from "../contract/transcript.js"
import { foldFileLines } from "../fs/lines.js"
import { RunLog } from "../run/RunLog.js"
import { prepareRun } from "./prepareRun.js"
import type { RunOrigin } from "../contract/origin.js"
import { startRun } from "./runStart.js"
import { openBox, type OpenBox } from "./openBox.js"
import { PREFLIGHT_EXIT, preflightError } from "./preflight.js"
import type { Interruption } from "../contract/interruption.js"
import type { DockerError } from "../docker/Docker.js"
import type { TakenWarm } from "./warmBox.js"
import { claimWarm } from "./warmClaim.js"

/** A run was asked for with an empty prompt (refused before anything is written). */
export class BlankPrompt extends Schema.TaggedError<BlankPrompt>()("BlankPrompt", {}) {
  override get message() {
    return `worker run needs a prompt, e.g.: roster worker run alice "summarise the notes in my store"`
  }
}

/** What a one-shot run is asked to do: the worker, the prompt, and optionally a ceiling, a task, a channel. */
export interface RunRequest {
  readonly worker: string
  readonly prompt: string
  /** Minutes; the org's `[box] ceiling_min` when absent. */
  readonly ceilingMin?: number
  /** A queued task's run: kind "task", ROSTER_TASK_ID in the box, task_id in the records. */
  readonly taskId?: string
  /** The run id when the caller must record it before the box starts (a task's claim). */
  readonly runId?: string
  /** Completes when the run must stop early (a cancelled task): the box is killed, the run ends "cancelled". */
  readonly stop?: Effect.Effect<void>
  readonly onStderr?: (chunk: Uint8Array) => Effect.Effect<void>
  /** Each line of pi's output as it arrives (the transcript file gets them all regardless). */
  readonly onLine?: (line: string) => Effect.Effect<void>
  /** The channel the run serves: /pihome/channel (its history, read-only) and the worker's store in it. */
  readonly channel?: string | null
  /** Who asked for the run (default: a queued task's queue, else a program embedding roster). */
  readonly origin?: RunOrigin
  /** Where a task's answer goes (its reply_to), said in the Start input. */
  readonly replyTo?: string | null
  /** The task and run whose pi session this run resumes. */
  readonly continues?: { readonly task_id: string | null; readonly run_id: string } | null
  /** The run a stop, a crash or a reboot ended, which this one carries on from (said in the Start input). */
  readonly interrupted?: Interruption | null
}

/** How a one-shot run ended: its id and folder, who ended it, the box's exit code, pi's final answer. */
export interface RunOutcome {
  readonly runId: string
  readonly runDir: string
  readonly endedBy: BoxEnd
  readonly exitCode: number | null
  /** Set when the box exited but its run failed all the same (pi exits 0 when the model call failed; a failed preflight), with the reason. */
  readonly error: string | null
  readonly finalText: string | null
  readonly messages: ReadonlyArray<string>
  /** The ceiling it ran under (minutes): its own, or the org's `[box] ceiling_min`. */
  readonly ceilingMin: number
}

/** The process exit code a CLI reports for a run: 2 at the ceiling, 1 for a failed model call, else the box's own (1 if none). */
export const cliExitCode = (o: Pick<RunOutcome, "endedBy" | "exitCode" | "error">) =>
  o.endedBy === "ceiling" ? 2 : o.endedBy === "budget" ? 3 : o.endedBy === "cancelled" ? 1 : o.exitCode === 0 && o.error ? 1 : o.exitCode ?? 1

const MessageLine = Schema.parseJson(Schema.Struct({ text: Schema.String }))

/** How many message_user messages a run's outcome carries (the rest stay in messages.jsonl). */
const MESSAGES_SHOWN = 100

/** What the box sent its person with message_user, as the gateway recorded it — read line by line, at most MESSAGES_SHOWN. */
const messagesOf = (runDir: string) =>
  foldFileLines(runFiles(runDir).messages, [] as ReadonlyArray<string>, (acc, l) => {
    if (acc.length > MESSAGES_SHOWN) return acc
    const m = Schema.decodeUnknownOption(MessageLine)(l)
    if (m._tag === "None") return acc
    return acc.length === MESSAGES_SHOWN ? [...acc, `… more messages in ${runFiles(runDir).messages}`] : [...acc, m.value.text]
  // Shown after the run as a courtesy; messages.jsonl itself is named in the run's outputs line.
  }).pipe(Effect.orElseSucceed((): ReadonlyArray<string> => []))

/** How a box ended as its runner saw it; "budget" when the gateway stopped the run, "fenced" when its fleet node did (read from its record). */
export type BoxEnd = "exit" | "ceiling" | "cancelled" | "budget" | "fenced" | "cut-off" | "tainted"

/**
 * The box's exit raced against the ceiling (and a stop, when the run has one); at the ceiling
 * or a stop it is killed and its code (if any) collected.
 */
export const awaitBox = (
  box: OpenBox,
  ceiling: Duration.Duration,
  stop: Effect.Effect<void> = Effect.never,
  killRefused: (e: DockerError) => Effect.Effect<void> = () => Effect.void
) =>
  Effect.raceAll([
    box.exited.pipe(Effect.map((code): number | "ceiling" | "cancelled" => code)),
    Effect.sleep(ceiling).pipe(Effect.as("ceiling" as const)),
    stop.pipe(Effect.as("cancelled" as const))
  ]).pipe(Effect.flatMap((first): Effect.Effect<{ readonly endedBy: BoxEnd; readonly exitCode: number | null }> =>
    typeof first === "number"
      ? Effect.succeed({ endedBy: "exit", exitCode: first })
      : box.kill.pipe(
        Effect.catchAll(killRefused),
        Effect.zipRight(box.exited.pipe(Effect.timeout("10 seconds"), Effect.option)),
        Effect.map((code) => ({ endedBy: first, exitCode: code._tag === "Some" ? code.value : null }))
      )
  ))

/**
 * Why a run whose box exited failed anyway: its preflight (the box was killed — by its runner or
 * the gateway — and the run's exit code says why), or a model call pi gave up on (it exits 0).
 */
const runError = (box: OpenBox, end: { readonly endedBy: BoxEnd; readonly exitCode: number | null }, modelError: string | undefined | null) =>
  Effect.map(box.preflight, (preflight) => {
    const failedPreflight = preflightError(preflight, box.plan.network)
    const error = failedPreflight ?? (end.endedBy === "exit" && modelError ? `the model call failed: ${modelError}` : null)
    return { error, exitCode: failedPreflight && end.endedBy === "exit" ? PREFLIGHT_EXIT : end.exitCode }
  })

/**
 * One pi session in a locked-down box (seed run_once / dispatch): prepared before anything is
 * written (prepareRun), then the run record and the box as scoped resources, the exit raced against the
 * ceiling. However it ends, the scope kills the box, revokes its token, snapshots the store
 * and finishes the record.
 */
export const runOnce = Effect.fn("box.runOnce")(function*(
  req: RunRequest,
  /**
   * A warm box of this worker the Runner took (and checked with warmFits): the run is the box's run
   * (its id, prepared at the check), and the box its box. The Runner closes the box's scope whatever happens here.
   */
  warm?: TakenWarm
) {
  if (req.prompt.trim() === "") return yield* Effect.fail(new BlankPrompt())
  // A warm box's run was prepared when the box was checked against it: the run is made from what was checked.
  const { ceiling, runId, org, settings, mounts, channel } = warm?.run ?? (yield* prepareRun({
    worker: req.worker,
    channel: req.channel,
    runId: req.runId,
    limits: { ceilingMin: req.ceilingMin },
    kind: "one-shot"
  }))
  // From here the warm box's folder is this run's: its record goes there, whether or not the box is reached.
  if (warm) yield* Ref.set(warm.claimed, true)
  const ceilingMin = org.box.ceiling_min
  const taskId = req.taskId ?? null

  const outcome = yield* Effect.gen(function*() {
    const { context, record, resumeFrom, sessionId, chatChannel } = yield* startRun({
      runId,
      worker: req.worker,
      kind: taskId ? "task" : "box",
      taskId,
      surface: taskId ? "queued-task" : "direct-box",
      origin: req.origin ?? { _tag: "person", via: "embed" },
      prompt: req.prompt,
      mounts,
      channel,
      replyTo: req.replyTo ?? null,
      continues: req.continues ?? null,
      interrupted: req.interrupted ?? null,
      org,
      system: warm?.run.system
    })
    const summary = yield* Ref.make(emptySummary)
    const onLine = (line: string) => Ref.update(summary, (s) => summaryStep(s, readEvent(line))).pipe(Effect.zipRight(req.onLine ? req.onLine(line) : Effect.void))
    const box = warm ? yield* claimWarm(warm, {
      record, taskId, chatChannel, ceiling, ceilingMin, prompt: context.input_prompt ?? req.prompt, onLine, linesWanted: worthReading
    }) : yield* openBox({
      record,
      kind: taskId ? "task" : "box",
      taskId,
      ceilingMin,
      ceiling,
      mode: "json",
      org,
      settings,
      mounts,
      channel,
      chatChannel,
      piArgs: ["--session-id", sessionId, "--append-system-prompt", context.system_prompt, context.input_prompt ?? req.prompt],
      ...(resumeFrom ? { resumeFrom } : {}),
      // The summary and the live view read pi's known events only: a box's other output is not handed on line by line.
      linesWanted: worthReading,
      onLine,
      ...(req.onStderr ? { onStderr: req.onStderr } : {})
    })
    // The ceiling is the deadline the box is labelled with, not a second clock started now.
    const left = Duration.millis(Math.max(0, box.plan.deadline - (yield* Clock.currentTimeMillis)))
    // A kill the engine refuses is said now, and kept on the record: the box may outlive its ceiling
    // until the daemon's reaper, which kills a box past its deadline, finds it.
    const killRefused = (e: DockerError) =>
      Effect.logWarning(`run ${runId}: its box's kill was refused by the engine (${e.message}); it may still run — roster's daemon stops it once it finds it past its deadline (roster server status)`).pipe(
        Effect.zipRight(record.note({ kill_error: e.message })),
        // Said just above whether or not the note lands: the reaper, not the note, is what stops the box.
        Effect.ignore
      )
    const end = yield* awaitBox(box, left, req.stop, killRefused).pipe(Effect.withSpan("box.await"))
    // The transcript is whole before the result is read or reported.
    yield* box.drained.pipe(Effect.timeout("10 seconds"), Effect.ignore, Effect.withSpan("box.drain"))
    const said = yield* Ref.get(summary)
    const messages = yield* messagesOf(record.runDir)
    const { error, exitCode } = yield* runError(box, end, said.errorMessage)
    yield* record.settle({
      ...end,
      exitCode,
      ...(error ? { error } : {}),
      extra: { final_text: said.finalText, stop_reason: said.stopReason, messages }
    })
    return { runId, runDir: record.runDir, ...end, exitCode, error, finalText: said.finalText, messages, ceilingMin } satisfies RunOutcome
  }).pipe(Effect.scoped)
  // The gateway may have stopped the run (a spend budget): its record, finished now, says so.
  const stopped = (yield* (yield* RunLog).read(req.worker, runId))?.stopped
  return stopped ? { ...outcome, endedBy: stopped.by, error: stopped.detail } satisfies RunOutcome : outcome
})
