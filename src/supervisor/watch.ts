import { Clock, Effect, FiberMap, Option, Queue, Ref } from "effect"
import { type Owner, ownerAlive } from "../contract/owner.js"
import { FleetMember } from "../fleet/FleetMember.js"
import { TaskStore } from "../task/TaskStore.js"
import type { FoundBox } from "../backend/foundBox.js"
import { BoxBackend } from "../backend/BoxBackend.js"
import { type HeldBox, type SupervisorState, withKey, withoutKey } from "./state.js"
import { taskEnd } from "./taskEnd.js"
import { interruptedEnd } from "./dispatch.js"
import { RunLog } from "../run/RunLog.js"
import { type TakeOver, takeOver } from "./takeOver.js"
import { removeOrSay } from "../backend/killOrSay.js"

/** How long past its deadline a box with a living owner gets, so the owner can record its own ceiling. */
const OWNER_GRACE_MS = 5_000

/** The boxes of this deployment the backend knows, by their labels. */
export const deploymentBoxes = Effect.flatMap(BoxBackend, (backend) => backend.list())

/**
 * A box as its run knows it. A warm box keeps its `warm` label for life, but once a run took it (its
 * record is in the folder it goes by) it is that run's box: a task's box, with the task's id and the
 * deadline its claim set — adopted after a daemon's crash as a cold task box is, not reaped.
 */
export const asItsRun = (box: FoundBox) =>
  Effect.gen(function*() {
    // A warm box under its own name waits for a run; one renamed may have its record in by now (or be mid-claim).
    if (box.kind !== "warm" || !box.named || !box.takenWarm) return box
    const record = yield* (yield* RunLog).read(box.worker, box.runId).pipe(Effect.orElseSucceed(() => undefined))
    if (!record) return box
    const deadline = record.deadline ? Date.parse(record.deadline) : Number.NaN
    return {
      ...box,
      kind: record.kind,
      taskId: record.task_id ?? null,
      deadline: Number.isFinite(deadline) ? deadline : box.deadline,
      takenWarm: true
    } satisfies FoundBox
  })

const sameOwner = (a: Owner | null, b: Owner) => a !== null && a.pid === b.pid && a.start === b.start

/** Takes over one box: finishes its run (and task), then forgets it. Runs in the supervisor's scope. */
const takeOverBox = (st: SupervisorState, box: FoundBox, how: TakeOver) =>
  Effect.gen(function*() {
    const end = yield* takeOver(box, how)
    yield* Ref.update(st.counts, (c) => (how.how === "adopt" && end.found ? { ...c, adopted: c.adopted + 1 } : { ...c, reaped: c.reaped + 1 }))
    yield* Effect.logInfo(
      `${how.how === "adopt" && end.found ? "adopted" : "reaped"} box ${box.name} of ${box.worker || "?"}: ${end.endedBy}` +
        (end.exitCode !== null ? ` (exit ${end.exitCode})` : "") + (end.error ? ` — ${end.error}` : "")
    )
    const taskId = ("taskId" in end ? end.taskId : undefined) ?? box.taskId
    if (taskId === null) return
    const cancelled = (yield* Ref.get(st.cancelRequested)).has(taskId)
    // A run the dead daemon cut (a taken warm box's pi, its input closed with the daemon) carries on as a cold task box's would.
    const carryOn = "cutByDaemon" in end && end.cutByDaemon && !cancelled ? yield* interruptedEnd(box.worker, box.runId, "restart") : undefined
    yield* (yield* TaskStore).update(taskId, (t, now) =>
      t.status !== "running" || t.run_ids.at(-1) !== box.runId
        ? t
        : carryOn
        ? { ...carryOn(t, now), adopted: true }
        : { ...taskEnd(end, cancelled)(t, now), adopted: true }).pipe(
        Effect.catchTag("NoSuchTask", () => Effect.void)
      )
  }).pipe(
    Effect.catchAllCause((c) => Effect.logError(`supervisor: taking over box ${box.name} failed`, c)),
    Effect.ensuring(Ref.update(st.held, (m) => withoutKey(m, box.id)).pipe(Effect.zipRight(Queue.offer(st.wake, undefined))))
  )

/**
 * A fleet node's task box whose task is no longer this node's current attempt: the fleet fenced
 * it (this node was declared lost while its daemon was down) and gave the task to another node.
 * Such a box is killed, never adopted.
 */
const fencedTaskBox = (box: FoundBox) =>
  Effect.gen(function*() {
    const member = yield* Effect.serviceOption(FleetMember)
    if (Option.isNone(member) || box.taskId === null) return false
    const t = yield* (yield* TaskStore).get(box.taskId)
    return !(t?.status === "running" && t.run_ids.at(-1) === box.runId && t.node === member.value.node)
  })

/**
 * One look at the deployment's boxes (the reaper; at start, adoption). A box of ours is left to
 * its fiber. A box whose owner is alive is left to it until its deadline (plus a grace for the
 * owner to record its own ceiling), then killed. A box whose owner is gone is taken over: a
 * task's box is adopted (waited for within what is left of its ceiling); any other is killed
 * (`orphaned`, `ceiling` once its deadline passed, or `fenced` when the fleet gave its task to
 * another node).
 */
export const watchPass = (st: SupervisorState, self: Owner) =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    for (const found of yield* deploymentBoxes) {
      if ((yield* Ref.get(st.held)).has(found.id)) continue
      const box = yield* asItsRun(found)
      const pastDeadline = box.deadline !== null && now > box.deadline
      // This daemon's own boxes are their runs' to end, but not past their ceiling: one a run let go of
      // (a box whose close went wrong) would otherwise live for good, the daemon being alive.
      const alive = sameOwner(found.owner, self) || (box.owner !== null && (yield* ownerAlive(box.owner)))
      if (alive) {
        if (box.deadline !== null && now > box.deadline + OWNER_GRACE_MS) {
          yield* Effect.logWarning(`box ${box.name} of ${box.worker} is past its ceiling and its owner (pid ${box.owner?.pid}) did not stop it: killed`)
          // Removed as well: a box never started (its create answered after its run was stopped) does not die of a kill.
          yield* removeOrSay(box.id, `box ${box.name} of ${box.worker}`)
          yield* Ref.update(st.counts, (c) => ({ ...c, reaped: c.reaped + 1 }))
        }
        continue
      }
      const fenced = box.kind === "task" && (yield* fencedTaskBox(box))
      const how: TakeOver = box.kind === "task" && !pastDeadline && !fenced
        ? { how: "adopt" }
        : { how: "reap", as: fenced ? "fenced" : pastDeadline ? "ceiling" : "orphaned" }
      const held: HeldBox = { containerId: box.id, runId: box.runId, worker: box.worker, taskId: box.taskId, how: how.how }
      yield* Ref.update(st.held, (m) => withKey(m, box.id, held))
      yield* FiberMap.run(st.takeovers, box.id, takeOverBox(st, box, how))
    }
  })

/** The reaper: a look every 3 s, so a box outlives a killed owner by seconds, not by its ceiling. */
export const watchLoop = (st: SupervisorState, self: Owner) =>
  Effect.sleep("3 seconds").pipe(
    Effect.zipRight(watchPass(st, self).pipe(Effect.catchAllCause((c) => Effect.logError("supervisor: a reaper pass failed", c)))),
    Effect.forever
  )
