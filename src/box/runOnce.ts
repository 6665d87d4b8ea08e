import { FileSystem, Path } from "@effect/platform"
import { Cause, Console, Effect, Schema } from "effect"
import * as fsp from "node:fs/promises"
import * as nodePath from "node:path"
import { validateWorkerName } from "../config/names.js"
import { messagesFile } from "../gateway/actions.js"
import { OrgConfig } from "../config/OrgConfig.js"
import { mountsFor } from "../config/schema.js"
import { causeText } from "../run/causeText.js"
import { newRunId } from "../run/runId.js"
import { RunLog } from "../run/RunLog.js"
import { readIdentity, readWorkerSettings } from "../worker/workers.js"
import { ceilingDuration, validateCeiling } from "./ceiling.js"
import { runContainer } from "./container.js"
import { compileContext } from "./context.js"
import { provisionBox } from "./provision.js"
import { containerSpec } from "./spec.js"
import { snapshotStore } from "./store.js"
import { summarize } from "./transcript.js"

export class BlankPrompt extends Schema.TaggedError<BlankPrompt>()("BlankPrompt", {}) {
  override get message() {
    return `worker run needs a prompt, e.g.: roster worker run alice "summarise the notes in my store"`
  }
}

export interface RunRequest {
  readonly worker: string
  readonly prompt: string
  /** Minutes; the org's `[box] ceiling_min` when absent. */
  readonly ceilingMin?: number
  readonly taskId?: string
  readonly onStderr?: (chunk: Uint8Array) => Effect.Effect<void>
  /** Each line of pi's output as it arrives (the transcript file gets them all regardless). */
  readonly onLine?: (line: string) => Effect.Effect<void>
}

export interface RunOutcome {
  readonly runId: string
  readonly runDir: string
  readonly endedBy: "exit" | "ceiling"
  readonly exitCode: number | null
  /** Set when the box exited but its run failed all the same (pi exits 0 when the model call failed). */
  readonly error: string | null
  readonly finalText: string | null
  readonly messages: ReadonlyArray<string>
}

/** The process exit code a CLI reports for a run: 2 at the ceiling, 1 for a failed model call, else the box's own (1 if none). */
export const cliExitCode = (o: Pick<RunOutcome, "endedBy" | "exitCode" | "error">) =>
  o.endedBy === "ceiling" ? 2 : o.exitCode === 0 && o.error ? 1 : o.exitCode ?? 1

const readOr = (file: string) => Effect.promise(() => fsp.readFile(file, "utf8").catch(() => ""))

/** What the run said: pi's final text and stop reason from the transcript, and its messages to its person. */
const outcomeOf = (runDir: string) =>
  Effect.gen(function*() {
    const summary = summarize(yield* readOr(nodePath.join(runDir, "stdout.jsonl")))
    const messages = (yield* readOr(messagesFile(runDir))).split("\n").flatMap((l) => {
      try {
        const m = JSON.parse(l) as { text?: unknown }
        return typeof m.text === "string" ? [m.text] : []
      } catch {
        return []
      }
    })
    return { summary, messages }
  })

/**
 * One pi session in a locked-down box: validate before anything is written, then
 * run log -> context -> provision -> container (raced against the ceiling) -> store snapshot -> run log.
 */
export const runOnce = Effect.fn("box.runOnce")(function*(req: RunRequest) {
  yield* validateWorkerName(req.worker)
  if (req.ceilingMin !== undefined) yield* validateCeiling(req.ceilingMin)
  if (req.prompt.trim() === "") return yield* Effect.fail(new BlankPrompt())
  yield* readIdentity(req.worker)
  const org = yield* (yield* OrgConfig).snapshot
  const settings = yield* readWorkerSettings(req.worker)
  const ceilingMin = req.ceilingMin ?? org.box.ceiling_min
  const path = yield* Path.Path
  const runLog = yield* RunLog

  const runId = yield* newRunId
  const taskId = req.taskId ?? null
  yield* runLog.start({ runId, worker: req.worker, kind: "box", ...(req.taskId ? { taskId: req.taskId } : {}) })
  const runDir = runLog.runDir(req.worker, runId)
  let started = false

  const box = Effect.gen(function*() {
    const context = yield* compileContext({
      runId,
      worker: req.worker,
      surface: "direct-box",
      prompt: req.prompt,
      mounts: mountsFor(org, req.worker)
    }, path.join(runDir, "context.json"))
    const { plan } = yield* provisionBox({
      worker: req.worker,
      runId,
      taskId,
      kind: "box",
      ceilingMin,
      mode: "json",
      org,
      settings
    })
    const spec = containerSpec({
      ...plan,
      piArgs: [
        "--session-id", context.cache.route_key,
        "--append-system-prompt", context.system_prompt,
        context.input_prompt ?? req.prompt
      ]
    })
    yield* runLog.update(req.worker, runId, { container: spec.name, image: spec.Image, ceiling_min: ceilingMin })
    started = true
    // pi's stderr is diagnostics, not conversation: it goes to stderr.log beside the transcript.
    const stderrLog = yield* Effect.flatMap(FileSystem.FileSystem, (fs) => fs.open(path.join(runDir, "stderr.log"), { flag: "w" })).pipe(Effect.option)
    return yield* runContainer(spec, {
      stdoutFile: path.join(runDir, "stdout.jsonl"),
      ceiling: ceilingDuration(ceilingMin),
      onStderr: (chunk) =>
        Effect.all([
          stderrLog._tag === "Some" ? stderrLog.value.writeAll(chunk).pipe(Effect.ignore) : Effect.void,
          req.onStderr ? req.onStderr(chunk) : Effect.void
        ], { discard: true }),
      ...(req.onLine ? { onLine: req.onLine } : {})
    })
  }).pipe(Effect.scoped)

  // However the box ended, the store gets its snapshot; a failed snapshot is reported, never fatal.
  const snapshot = Effect.gen(function*() {
    if (!started) return null
    const outcome = yield* snapshotStore(req.worker, runId, settings.store.snapshots).pipe(
      Effect.catchAll((e) => Console.error(`run ${runId}: ${e.message}`).pipe(Effect.as(undefined)))
    )
    if (!outcome) return null
    yield* Console.error(`run ${runId}: store snapshot ${path.basename(outcome.dir)} (${outcome.changes} change${outcome.changes === 1 ? "" : "s"})`)
    return outcome.dir
  })

  const end = yield* box.pipe(
    Effect.onError((cause) =>
      Effect.gen(function*() {
        const store_snapshot = yield* snapshot
        const interrupted = Cause.isInterruptedOnly(cause)
        yield* runLog.finish(req.worker, runId, {
          endedBy: interrupted ? "signal" : "error",
          exitCode: null,
          ...(interrupted ? {} : { error: causeText(cause) }),
          extra: { store_snapshot }
        }).pipe(Effect.ignore)
        if (interrupted) yield* Console.error(`box ${runId} ended by signal\noutputs: ${runDir}`)
      }).pipe(Effect.uninterruptible)
    )
  )
  const store_snapshot = yield* snapshot
  const { messages, summary } = yield* outcomeOf(runDir)
  const error = end.endedBy === "exit" ? summary.errorMessage : null
  yield* runLog.finish(req.worker, runId, {
    endedBy: end.endedBy,
    exitCode: end.exitCode,
    ...(error ? { error: `the model call failed: ${error}` } : {}),
    extra: { store_snapshot, final_text: summary.finalText, stop_reason: summary.stopReason, messages }
  })
  return { runId, runDir, ...end, error, finalText: summary.finalText, messages } satisfies RunOutcome
})
