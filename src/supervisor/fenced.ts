import { answerWithin } from "../contract/answerWithin.js"
import { type Context, Effect, Ref, Schedule } from "effect"
import { BoxBackend } from "../backend/BoxBackend.js"
import type { FleetMember } from "../fleet/FleetMember.js"
import { RunLog } from "../run/RunLog.js"
import type { SupervisorState } from "./state.js"
import { deploymentBoxes } from "./watch.js"

/** What a fenced node's killed run says of its end. */
export const FENCED_STOP = "its fleet node was declared lost while it ran (silent past [cluster] node_timeout_s) and the fleet fenced it: " +
  "nothing it did after can land, and its task (if any) went back to the queue — see: roster task show"

/** What a run stopped by its own node, cut off from the fleet's database, says of its end. */
export const CUT_OFF_STOP = "its fleet node was cut off from the fleet's database while it ran, and stopped its boxes before its lease " +
  "could expire (so the fleet could re-run the task elsewhere without two boxes of one worker): the task carries on from this run"

/** How long a fenced node waits for its killed boxes to be gone before it tries again at its next look. */
const GONE_WAIT = Schedule.spaced("250 millis").pipe(Schedule.upTo("30 seconds"))

/**
 * A node the fleet fenced (it was declared lost while frozen or cut off, and its tasks were given
 * to other nodes) kills every box it runs — each run's end recorded as fenced first, so its
 * record says why — and once they are all gone, and its own task fibers have ended, joins the
 * fleet again as a new instance. Until then it claims nothing and its boxes land nothing.
 */
export const leaveFenced = (st: SupervisorState, member: Context.Tag.Service<FleetMember>) =>
  Effect.gen(function*() {
    if (!(yield* member.fenced)) return
    const killed = yield* killBoxes("fenced", FENCED_STOP)
    if (killed > 0) yield* Effect.logWarning(`fleet: node ${member.node} fenced: killed ${killed} box${killed === 1 ? "" : "es"}`)
    const gone = yield* Effect.gen(function*() {
      const left = (yield* deploymentBoxes).length + (yield* Ref.get(st.live)).size
      if (left > 0) return yield* Effect.fail(left)
    }).pipe(Effect.retry(GONE_WAIT), Effect.either)
    if (gone._tag === "Left") {
      return yield* Effect.logWarning(`fleet: node ${member.node} fenced: ${gone.left} of its boxes or runs are not gone yet; it tries again`)
    }
    yield* member.rejoin
  })

/**
 * A node cut off from its fleet's database (no heartbeat landed for `[cluster] node_timeout_s`
 * less two beats) stops every box it runs — chat sessions' and handed-over runs' too — each run's
 * end noted first, so its task goes back to the queue to carry on from it. It does this before
 * the fleet could fence it, so the fleet never runs a task of it elsewhere while its box still
 * runs here. Asked every second while cut off: a box started meanwhile goes the same way.
 */
export const standDown = (member: Context.Tag.Service<FleetMember>) =>
  Effect.gen(function*() {
    if (!(yield* member.cutOff) || (yield* member.fenced)) return
    const killed = yield* killBoxes("cut-off", CUT_OFF_STOP)
    if (killed > 0) {
      yield* Effect.logWarning(`fleet: node ${member.node} is cut off from the fleet's database: stopped ${killed} box${killed === 1 ? "" : "es"}`)
    }
  })

/** Kills every box of this deployment, each named run's end noted first as `by` (a note that does not land in a second is skipped, never waited on). */
const killBoxes = (by: "fenced" | "cut-off", detail: string) =>
  Effect.gen(function*() {
    const backend = yield* BoxBackend
    const runLog = yield* RunLog
    const boxes = yield* deploymentBoxes
    for (const box of boxes) {
      if (box.named) {
        yield* runLog.append(box.worker, box.runId, { kind: "stop", by, detail }).pipe(
          answerWithin("1 second", () => new Error("no answer in 1 s")),
          Effect.catchAll((e) => Effect.logWarning(`fleet: run ${box.runId}: its ${by} end could not be noted: ${e.message}`))
        )
      }
      yield* backend.kill(box.id).pipe(Effect.catchAll((e) => Effect.logWarning(`fleet: box ${box.name} could not be killed: ${e.message}`)))
    }
    return boxes.length
  })
