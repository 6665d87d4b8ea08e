import { type Context, Effect, Ref, Schedule } from "effect"
import { Docker } from "../docker/Docker.js"
import type { FleetMember } from "../fleet/FleetMember.js"
import { RunLog } from "../run/RunLog.js"
import type { SupervisorState } from "./state.js"
import { deploymentBoxes } from "./watch.js"

/** What a fenced node's killed run says of its end. */
export const FENCED_STOP = "its fleet node was declared lost while it ran (silent past [cluster] node_timeout_s) and the fleet fenced it: " +
  "nothing it did after can land, and its task (if any) went back to the queue — see: roster task show"

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
    const docker = yield* Docker
    const runLog = yield* RunLog
    const boxes = yield* deploymentBoxes
    for (const box of boxes) {
      if (box.named) {
        yield* runLog.append(box.worker, box.runId, { kind: "stop", by: "fenced", detail: FENCED_STOP }).pipe(
          Effect.catchAll((e) => Effect.logWarning(`fleet: run ${box.runId}: its fenced end could not be noted: ${e.message}`))
        )
      }
      yield* docker.containerKill(box.id).pipe(Effect.catchAll((e) => Effect.logWarning(`fleet: box ${box.name} could not be killed: ${e.message}`)))
    }
    if (boxes.length > 0) yield* Effect.logWarning(`fleet: node ${member.node} fenced: killed ${boxes.length} box${boxes.length === 1 ? "" : "es"}`)
    const gone = yield* Effect.gen(function*() {
      const left = (yield* deploymentBoxes).length + (yield* Ref.get(st.live)).size
      if (left > 0) return yield* Effect.fail(left)
    }).pipe(Effect.retry(GONE_WAIT), Effect.either)
    if (gone._tag === "Left") {
      return yield* Effect.logWarning(`fleet: node ${member.node} fenced: ${gone.left} of its boxes or runs are not gone yet; it tries again`)
    }
    yield* member.rejoin
  })
