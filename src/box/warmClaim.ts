import { Path } from "@effect/platform"
import { Clock, Duration, Effect, Ref, Scope } from "effect"
import { RUN_ENV_NAME } from "../contract/constants.js"
import { readEvent } from "../contract/piEvents.js"
import type { OpenRecord } from "../run/record.js"
import { failpoint } from "../run/failpoint.js"
import { RunLog } from "../run/RunLog.js"
import { bindIdentity } from "./identity.js"
import { writeJson } from "../fs/atomic.js"
import { knowledgeVars } from "../knowledge/Checkout.js"
import { refreshCheckouts } from "../knowledge/refresh.js"
import { noteBox, type OpenBox, reposOnClose, snapshotOnClose } from "./openBox.js"
import { hostUser } from "./provision.js"
import type { TakenWarm } from "./warmBox.js"

/** The run that takes a warm box: its record, task and channel, its ceiling, its first prompt, who reads its lines. */
export interface WarmClaim {
  readonly record: OpenRecord
  readonly taskId: string | null
  readonly chatChannel?: string | undefined
  readonly ceiling: Duration.Duration
  /** A one-shot's ceiling in minutes (null for a session, whose turns and whole have their own). */
  readonly ceilingMin: number | null
  /**
   * A one-shot's Start input: pi's first and only prompt, the conversation closed after its turn. A
   * session sends none here (its first message is its first turn, prompted by its own runner).
   */
  readonly prompt?: string
  readonly onLine: (line: string) => Effect.Effect<void>
  readonly linesWanted?: (line: string) => boolean
}

/**
 * A warm box taken by a run, as the run's own box: the box's scope becomes the run's (its close —
 * the box killed, the token revoked — runs before the store's snapshot, as a cold box's), the token
 * bound to the run, its ceiling starting now. A one-shot's Start input goes as pi's first prompt and
 * the conversation is closed after that one turn, so the box exits as a one-shot box does.
 */
export const claimWarm = Effect.fn("warm.claim")(function*(warm: TakenWarm, claim: WarmClaim) {
  const { record } = claim
  yield* failpoint("warm.claim.recorded")
  yield* snapshotOnClose(record, warm.settings.store.snapshots)
  // After the box is gone, as a cold box's: the run's repo work backstopped, its clones removed.
  yield* Effect.addFinalizer(() => reposOnClose(record))
  yield* Effect.addFinalizer((exit) => Scope.close(warm.scope, exit))
  yield* bindIdentity(warm.identity, record.worker, record.runId, claim.taskId, claim.chatChannel)
  yield* failpoint("warm.claim.bound")
  // Its clones, made when the box was, start the run from where their canonical repos are now.
  const checkouts = warm.plan.checkouts.length === 0 ? [] : yield* refreshCheckouts(record.worker, record.runId, hostUser())
  const deadline = (yield* Clock.currentTimeMillis) + Duration.toMillis(claim.ceiling)
  const kind = claim.taskId ? "task" as const : warm.shape.kind === "session" ? "session" as const : "box" as const
  const plan = { ...warm.plan, kind, taskId: claim.taskId, deadline }
  yield* noteBox(record, plan, claim.ceilingMin, true, warm.madeAs)
  // Its run id too: the box was started under an id of its own, and handed to the run under the run's.
  const runEnv = { ROSTER_RUN_ID: record.runId, ...(claim.taskId ? { ROSTER_TASK_ID: claim.taskId } : {}), ...knowledgeVars(checkouts) }
  yield* writeRunEnv(warm.plan.dirs.pihome, runEnv)
  const runLog = yield* RunLog
  const closed = yield* Ref.make(false)
  // One turn: its end (or pi refusing the prompt) closes pi's stdin, and pi exits 0 as json mode does.
  const closeOnce = Ref.getAndSet(closed, true).pipe(Effect.flatMap((was) => (was ? Effect.void : warm.box.closeStdin)))
  const { prompt } = claim
  yield* Ref.set(warm.lines, (line) => {
    if (claim.linesWanted && !claim.linesWanted(line)) return Effect.void
    if (prompt === undefined) return claim.onLine(line)
    const event = readEvent(line).kind
    const ends = event === "turn-end" || event === "settled" || event === "prompt-refused"
    return claim.onLine(line).pipe(Effect.zipRight(ends ? closeOnce : Effect.void))
  })
  // The box goes by the run's name before pi is asked anything: the run's first request is served under that name.
  yield* warm.renamed
  if (prompt !== undefined) yield* warm.box.write(`${JSON.stringify({ type: "prompt", message: prompt })}\n`)
  return {
    id: warm.box.id,
    plan,
    exited: warm.box.exited,
    stdoutEnded: warm.stdoutEnded,
    drained: warm.drained,
    write: warm.box.write,
    closeStdin: closeOnce,
    kill: warm.box.kill,
    // The box reported its preflight to the gateway while it waited; the gateway's decision is in the run's events.
    preflight: runLog.read(record.worker, record.runId).pipe(
      Effect.map((r) => r?.preflight),
      Effect.orElseSucceed(() => undefined)
    )
  } satisfies OpenBox
})

/**
 * What a cold box of the run has in its environment and a warm one could not (it started before
 * its run was known: its run id, its task, its repos' branch and base): written before the first
 * prompt, read by the box's run_env extension. A failure to write it fails the claim, so a task
 * never runs without its id.
 */
const writeRunEnv = (pihome: string, env: Record<string, string>) =>
  Effect.flatMap(Path.Path, (path) => writeJson(path.join(pihome, RUN_ENV_NAME), env, 0o644))
