import { FileSystem, Path } from "@effect/platform"
import { Effect, Fiber, Ref, Schema } from "effect"
import { BoxBackend } from "../backend/BoxBackend.js"
import { Paths, layout } from "../config/Paths.js"
import { currentOwner } from "../contract/owner.js"
import { writeJson } from "../fs/atomic.js"
import { moveCheckouts } from "../knowledge/moveCheckouts.js"
import { failpoint } from "../run/failpoint.js"
import type { PreparedRun } from "./prepareRun.js"
import { hostUser } from "./provision.js"
import type { TakenWarm, WarmBox } from "./warmBox.js"
import { WarmBoxUnready } from "./warmReady.js"

/** The hand-over's mark in a warm box's folder: the ids it goes between, and the daemon that began it. */
export const HANDOVER_FILE = "warm-handover.json"

export const HandOverMark = Schema.Struct({ from: Schema.String, to: Schema.String, maker: Schema.Struct({ pid: Schema.Number, start: Schema.String }) })
export type HandOverMark = typeof HandOverMark.Type

/** How long a claim waits for the preflight of a box taken as it was made. */
const PREFLIGHT_CLAIM_WAIT = "5 seconds"

/**
 * A warm box handed to the run `run` was prepared as, under that run's id: a run's id says when the
 * run started, not when its box was made. The box is renamed (every later look — the gateway's, the
 * reaper's, a restarted daemon's — finds a run's box by its name; the claim awaits it), and its clones
 * and its folder moved (its mounts follow: a bind mount holds the folder, not its path). A daemon
 * killed halfway leaves a box its next start removes (no run record under its name), a warm token
 * naming the old id (removed with what is left under that id), or a run record with no box of its
 * name (finished as orphaned).
 */
export const handOverWarm = Effect.fn("warm.handOver")(function*(warm: WarmBox, run: PreparedRun) {
  const to = run.runId
  // A box taken in its first moments waits for the rest of its preflight (well under a cold start); one whose preflight hangs is not taken.
  yield* warm.preflightIn.pipe(Effect.timeoutFail({
    duration: PREFLIGHT_CLAIM_WAIT,
    onTimeout: () => new WarmBoxUnready({ worker: warm.worker, why: `its preflight was not in within ${PREFLIGHT_CLAIM_WAIT} of its claim` })
  }))
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const files = layout(yield* Paths)
  const from = files.runDir(warm.worker, warm.runId)
  const runDir = files.runDir(warm.worker, to)
  // First, in the folder that moves: a daemon killed anywhere from here until the run's record is in
  // leaves a folder (under either id) that says whose hand-over it was, and its next start removes it.
  yield* writeJson(path.join(from, HANDOVER_FILE), { from: warm.runId, to, maker: yield* currentOwner } satisfies HandOverMark, 0o600)
  yield* failpoint("warm.handOver.marked")
  // Asked now and awaited by the claim before its first prompt: the engine's rename takes 10–20 ms, the run's record and token meanwhile.
  const renaming = yield* Effect.forkIn((yield* BoxBackend).rename(warm.box.id, to).pipe(Effect.tap(() => failpoint("warm.handOver.renamed"))), warm.scope)
  yield* Ref.set(warm.goesBy, to)
  const checkouts = warm.plan.checkouts.length === 0 ? [] : yield* moveCheckouts(warm.worker, warm.runId, to, hostUser())
  yield* fs.rename(from, runDir)
  yield* failpoint("warm.handOver.moved")
  const moved = (p: string) => (p.startsWith(from + path.sep) ? runDir + p.slice(from.length) : p)
  const { dirs } = warm.plan
  return {
    ...warm,
    runId: to,
    madeAs: warm.runId,
    renamed: Fiber.join(renaming),
    run,
    plan: { ...warm.plan, runId: to, checkouts, dirs: { ...dirs, pihome: moved(dirs.pihome), inbox: moved(dirs.inbox), selfView: moved(dirs.selfView) } }
  } satisfies TakenWarm
})
