import { FileSystem } from "@effect/platform"
import { Clock, Duration, Effect, Either, Fiber } from "effect"
import { revokeRunTokens } from "../box/identity.js"
import { reposOnClose, snapshotOnClose } from "../box/openBox.js"
import { removeUntakenWarm } from "../box/warmBox.js"
import { drainTo, outputCaps } from "../box/output.js"
import { OrgConfig } from "../config/OrgConfig.js"
import { foldFileLines } from "../fs/lines.js"
import { runFiles } from "../contract/runFiles.js"
import { emptySummary, summaryLine } from "../contract/transcript.js"
import { readEvent } from "../contract/piEvents.js"
import { BoxBackend, type FoundAgain } from "../backend/BoxBackend.js"
import type { OpenRecord } from "../run/record.js"
import { resumeRunRecord } from "../run/record.js"
import type { EndedBy } from "../run/RunLog.js"
import { readWorkerSettings } from "../worker/workers.js"
import type { FoundBox } from "../backend/foundBox.js"
import type { RunEnded } from "./taskEnd.js"
import { killOrSay, removeOrSay } from "../backend/killOrSay.js"

/**
 * adopt: a task's box left running by a daemon that died — wait for it within what is left of
 * its ceiling. reap: a box whose owner is gone or whose ceiling passed — kill it now.
 */
export type TakeOver = { readonly how: "adopt" } | { readonly how: "reap"; readonly as: EndedBy }

const killAndRemove = (id: string) => removeOrSay(id, `box ${id}`)

/**
 * The adopted box's output picks up where its dead owner stopped writing: the engine replays
 * what the box printed, and the bytes already in the files are skipped.
 */
const reattach = (box: FoundBox, runDir: string, output: FoundAgain["output"]) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const files = runFiles(runDir)
    // A file that cannot be measured skips nothing: the replay may repeat lines in it, never lose one.
    const sizeOf = (file: string) => fs.stat(file).pipe(Effect.map((s) => Number(s.size)), Effect.orElseSucceed(() => 0))
    const caps = outputCaps((yield* (yield* OrgConfig).snapshot).box)
    const attached = yield* output
    const out = yield* Effect.forkScoped(drainTo(attached.stdout, files.transcript, { skip: yield* sizeOf(files.transcript), ...caps }))
    const err = yield* Effect.forkScoped(drainTo(attached.stderr, files.stderr, { skip: yield* sizeOf(files.stderr), ...caps }))
    return Fiber.join(out).pipe(Effect.zipRight(Fiber.join(err)))
  }).pipe(
    Effect.tapError((e) => Effect.logWarning(`box ${box.name}: its output after the restart is not recorded (${e.message})`)),
    // Said just above; the box's end is awaited all the same.
    Effect.orElseSucceed(() => Effect.void)
  )

/** The adopted box's exit raced against the rest of its ceiling; at the ceiling it is killed. */
const awaitAdopted = (box: FoundBox, runDir: string) =>
  Effect.gen(function*() {
    const backend = yield* BoxBackend
    // The wait is armed first: an AutoRemove box that exits in between is then still reported with its code.
    const found = yield* backend.findAgain(box.id).pipe(Effect.either)
    if (Either.isLeft(found)) {
      yield* reattach(box, runDir, Effect.fail(found.left))
      return { endedBy: "box-died" as const, exitCode: null, error: `the box was gone before it could be adopted (${found.left.message})` }
    }
    const wait = found.right.exited
    const drained = yield* reattach(box, runDir, found.right.output)
    const left = box.deadline === null ? Duration.infinity : Duration.millis(Math.max(0, box.deadline - (yield* Clock.currentTimeMillis)))
    const first = yield* Effect.raceFirst(
      wait.pipe(Effect.either),
      Effect.sleep(left).pipe(Effect.as("ceiling" as const))
    )
    // The output is whole before the run's final text is read from it.
    const whole = drained.pipe(Effect.timeout("10 seconds"), Effect.ignore)
    if (first !== "ceiling") {
      yield* whole
      return Either.isRight(first)
        ? { endedBy: "exit" as const, exitCode: first.right, error: null }
        : { endedBy: "box-died" as const, exitCode: null, error: first.left.message }
    }
    yield* killOrSay(box.id, `run ${box.runId} of ${box.worker} (past its ceiling)`)
    const code = yield* wait.pipe(Effect.timeout("10 seconds"), Effect.option)
    yield* whole
    return { endedBy: "ceiling" as const, exitCode: code._tag === "Some" ? code.value : null, error: null }
  })

const settleFrom = (record: OpenRecord, end: { readonly endedBy: EndedBy; readonly exitCode: number | null; readonly error: string | null }) =>
  Effect.gen(function*() {
    // The transcript holds what the box said under its first owner and, for an adopted box, after.
    const said = yield* foldFileLines(runFiles(record.runDir).transcript, emptySummary, summaryLine).pipe(
      Effect.orElseSucceed(() => emptySummary)
    )
    yield* record.settle({
      endedBy: end.endedBy,
      exitCode: end.exitCode,
      ...(end.error ? { error: end.error } : {}),
      extra: { final_text: said.finalText, stop_reason: said.stopReason }
    })
    return said.finalText
  })

const CUT_BY_DAEMON = "its daemon stopped mid-turn, and the box's pi, whose input closed with it, ended before the turn did"

/** Whether pi's transcript in `runDir` ends a turn (a taken warm box's one prompt answered). */
const turnEnded = (runDir: string) =>
  foldFileLines(runFiles(runDir).transcript, false, (ended, line) => {
    if (ended) return true
    const kind = readEvent(line).kind
    return kind === "turn-end" || kind === "settled"
    // A transcript that cannot be read is taken for a turn cut short: its task carries on, never counted done unread.
  }).pipe(Effect.orElseSucceed(() => false))

const removeWarmFolder = (box: FoundBox) =>
  removeUntakenWarm(box.worker, box.runId).pipe(
    Effect.catchAll((e) => Effect.logWarning(`warm box ${box.name}: its folder could not be removed (${e.message})`))
  )

/**
 * Finishes a box its owner left: the run record is held again and finished from this scope's
 * Exit (marked adopted), the store snapshotted, the run's tokens revoked and the box removed —
 * the same closings `openBox` registers, in the same order. A box whose run record cannot be
 * found (or whose labels name none) is killed and reported: nothing may run unaccounted.
 */
export const takeOver = Effect.fn("supervisor.takeOver")(function*(box: FoundBox, how: TakeOver) {
  const unknown = {
    runId: box.runId,
    endedBy: "orphaned",
    exitCode: null,
    error: "no run record: the box was killed"
  } satisfies RunEnded
  if (!box.named) {
    yield* killAndRemove(box.id)
    return { ...unknown, found: false }
  }
  return yield* Effect.scoped(Effect.gen(function*() {
    const held = yield* resumeRunRecord(box.worker, box.runId).pipe(Effect.either)
    // revokeRunTokens says itself each token it could not remove, with the fix.
    yield* Effect.addFinalizer(() => revokeRunTokens(box.runId).pipe(Effect.ignore))
    if (Either.isLeft(held)) {
      yield* killAndRemove(box.id)
      // A warm box no run took (its daemon was killed): nothing of a run is in its folder, so it goes too.
      if (box.kind === "warm") yield* removeWarmFolder(box)
      return { ...unknown, found: false, ...(box.kind === "warm" ? { error: "a warm box no run took: removed" } : {}) }
    }
    const record = held.right.open
    // A worker.toml that does not read keeps the default count of snapshots (5).
    const keep = yield* readWorkerSettings(box.worker).pipe(Effect.map((s) => s.store.snapshots), Effect.orElseSucceed(() => 5))
    yield* snapshotOnClose(record, keep)
    yield* Effect.addFinalizer(() => reposOnClose(record))
    yield* Effect.addFinalizer(() => killAndRemove(box.id))
    const adopted = how.how === "adopt"
      ? yield* awaitAdopted(box, record.runDir)
      : yield* Effect.flatMap(BoxBackend, (b) => b.kill(box.id)).pipe(
        // The finalizer above kills and removes it again, and says a refusal (removeOrSay).
        Effect.ignore,
        Effect.as({ endedBy: how.as, exitCode: null, error: null })
      )
    // A taken warm box's pi reads its prompts on stdin, which closed with its daemon: one that exited before its
    // turn ended was cut by the crash, not done — its run ends as a run the daemon's death left, and its task carries on.
    const cutByDaemon = box.takenWarm === true && adopted.endedBy === "exit" && !(yield* turnEnded(record.runDir))
    const end = cutByDaemon ? { endedBy: "orphaned" as const, exitCode: adopted.exitCode, error: CUT_BY_DAEMON } : adopted
    const finalText = yield* settleFrom(record, end)
    return {
      runId: box.runId,
      endedBy: end.endedBy,
      exitCode: end.exitCode,
      error: end.error,
      finalText,
      ceilingMin: held.right.record.ceiling_min ?? null,
      found: true,
      // A warm box's labels name no task (it was made before any run took it): its record does.
      taskId: box.taskId ?? held.right.record.task_id,
      cutByDaemon
    } satisfies RunEnded & { readonly found: boolean; readonly taskId: string | null; readonly cutByDaemon: boolean }
  }))
})

/**
 * A run whose owner died and whose box is gone too (a task claimed just before the daemon was
 * killed, say): its record is finished as orphaned and any token it left is revoked.
 */
export const finishLeftRun = (worker: string, runId: string, reason: string) =>
  Effect.scoped(Effect.gen(function*() {
    // revokeRunTokens says itself each token it could not remove, with the fix.
    yield* Effect.addFinalizer(() => revokeRunTokens(runId).pipe(Effect.ignore))
    const held = yield* resumeRunRecord(worker, runId).pipe(Effect.option)
    if (held._tag === "None" || held.value.record.finished_at !== null) return
    // Its gated repos still hold whatever it did: parked like any run's end, before the record closes.
    yield* reposOnClose(held.value.open)
    yield* held.value.open.settle({ endedBy: "orphaned", exitCode: null, error: reason })
  }))
