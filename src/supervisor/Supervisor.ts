import { FileSystem, Path } from "@effect/platform"
import { Clock, Context, Deferred, Effect, Fiber, FiberMap, Layer, Option, Queue, Ref, Schedule, type Scope, Stream } from "effect"
import { OrgConfig } from "../config/OrgConfig.js"
import type { BoxView, ServerStatus } from "../api/ControlApi.js"
import { currentOwner, type Owner } from "../contract/owner.js"
import { Paths, layout } from "../config/Paths.js"
import { BoxBackend } from "../backend/BoxBackend.js"
import { Files } from "../fs/Files.js"
import { WarmPool } from "../runner/WarmPool.js"
import { RunLog } from "../run/RunLog.js"
import { FleetMember } from "../fleet/FleetMember.js"
import { type AddedTask, isFinal, NoSuchTask, type TaskRecord, TaskRefused, type TaskStatus, type TaskStoreError } from "../task/TaskRecord.js"
import { byQueueOrder, TaskStore } from "../task/TaskStore.js"
import { logDefects } from "../report/defects.js"
import { dispatchLoop, hasSession, holdSlot, holdWorker, HOLD_REASON } from "./dispatch.js"
import { archiveUnread, cancelInPlace, cancelQueued, PERSON, queueTask, retryTask, type TaskRequest } from "./queueTask.js"
import { makeState, type SupervisorState } from "./state.js"
import { deliverPending } from "./deliver.js"
import { strayLoop, sweepStrays } from "./strays.js"
import { finishLeftRun } from "./takeOver.js"
import { leaveFenced, standDown } from "./fenced.js"
import { interruptedFail, requeueInterrupted, taskFailed } from "./taskEnd.js"
import { deploymentBoxes, watchLoop, watchPass } from "./watch.js"
import { boxFacts } from "../backend/foundBox.js"
import { killOrSay } from "../backend/killOrSay.js"
import { isNotFound } from "../fs/notFound.js"

/** Which tasks `list` returns: one worker's, one status, or all. */
export interface TaskFilter {
  readonly worker?: string | undefined
  readonly status?: TaskStatus | undefined
  /** The archived tasks too (finished past [supervisor] keep_days). */
  readonly all?: boolean | undefined
}

/** The daemon's work over time: the task queue, its dispatch, and every box left without an owner. */
export interface SupervisorApi {
  readonly add: (req: TaskRequest & { readonly via?: "cli" | "web" | "api" | undefined }) => Effect.Effect<AddedTask, TaskRefused | TaskStoreError>
  readonly list: (filter: TaskFilter) => Effect.Effect<ReadonlyArray<TaskRecord>>
  readonly show: (taskId: string) => Effect.Effect<TaskRecord, NoSuchTask>
  readonly cancel: (taskId: string) => Effect.Effect<TaskRecord, NoSuchTask | TaskRefused | TaskStoreError>
  /** A failed or cancelled task back in the queue, carrying on from its last run. */
  readonly retry: (taskId: string) => Effect.Effect<TaskRecord, NoSuchTask | TaskRefused | TaskStoreError>
  /**
   * A box slot for a box that is not a task's (a chat session's), held until the scope closes:
   * waits for `[supervisor] concurrency` and for the worker's other box, and counts toward both.
   */
  readonly holdSlot: (worker: string, key: string) => Effect.Effect<void, never, Scope.Scope>
  /**
   * A person's handed-over run's place as its worker's one box on this node, held until the scope
   * closes: waits (said once through `waiting`) while the worker has a box here; takes no slot.
   */
  readonly holdWorker: (worker: string, key: string, waiting: (text: string) => Effect.Effect<void>) => Effect.Effect<void, never, Scope.Scope>
  /** Queue counts, live boxes, adopted/reaped since start (pid, version and config root are the daemon's to add). */
  readonly status: Effect.Effect<Omit<ServerStatus, "pid" | "version" | "config_root" | "started_at">>
}

const CANCEL_WAIT = "30 seconds"

/** A live task, else an archived one (past keep_days), else NoSuchTask. */
export const findTask = (taskId: string) =>
  Effect.gen(function*() {
    const store = yield* TaskStore
    const t = (yield* store.get(taskId)) ?? (yield* store.getArchived(taskId).pipe(archiveUnread(taskId)))
    return t ?? (yield* Effect.fail(new NoSuchTask({ taskId })))
  })

/**
 * Finished tasks past `[supervisor] keep_days` leave the live list (the queue every pass reads
 * stays the size of the work at hand), at start and every hour; a store that cannot move them
 * now is tried at the next pass.
 */
const archiveLoop = Effect.gen(function*() {
  const org = yield* (yield* OrgConfig).snapshot
  const before = (yield* Clock.currentTimeMillis) - org.supervisor.keep_days * 86_400_000
  const moved = yield* (yield* TaskStore).archive(before)
  if (moved > 0) yield* Effect.logInfo(`supervisor: ${moved} task(s) finished over ${org.supervisor.keep_days} days ago archived (roster task list --all shows them)`)
}).pipe(
  Effect.catchAll((e) => Effect.logWarning(`supervisor: finished tasks could not be archived now (${e.message}); tried again in an hour`)),
  logDefects("supervisor: unexpected failure archiving finished tasks (tried again in an hour)"),
  Effect.repeat(Schedule.spaced("1 hour"))
)

/**
 * Tasks left `running` by a daemon that died (a crash, a reboot): adopted when their box still
 * runs; else their run is finished and the task goes back to the queue to carry on from it
 * (`[supervisor] on_interrupt = "resume"`), or fails ("fail").
 */
const recover = (node: string | null) => Effect.gen(function*() {
  const store = yield* TaskStore
  const alive = new Set((yield* deploymentBoxes).map((b) => b.runId))
  const resume = (yield* (yield* OrgConfig).snapshot.pipe(Effect.option)).pipe(Option.map((o) => o.supervisor.on_interrupt), Option.getOrElse(() => "resume"))
  for (const t of yield* store.list) {
    const runId = t.run_ids.at(-1)
    if (t.status !== "running" || (runId !== undefined && alive.has(runId))) continue
    // Another node's running task is that node's to finish (a lost node's, the fleet's to fence).
    if (node !== null && t.node !== undefined && t.node !== node) continue
    const failed = interruptedFail("restart")
    if (runId !== undefined) yield* finishLeftRun(t.worker, runId, failed)
    if (resume === "resume" && runId !== undefined) {
      const resumable = yield* hasSession(t.worker, runId)
      yield* store.update(t.task_id, (x, now) => (x.status === "running" ? requeueInterrupted(runId, "restart", resumable)(x, now) : x))
      yield* Effect.logWarning(`task ${t.task_id} (${t.worker}): the daemon stopped while run ${runId} ran and its box is gone; it is queued again to carry on`)
      continue
    }
    yield* store.update(t.task_id, taskFailed(failed))
    yield* Effect.logWarning(`task ${t.task_id} (${t.worker}) failed: ${failed}`)
  }
})

/** Cancels a running task: its stop is raced in the run, then the fiber is waited for (and interrupted if it hangs). */
const cancelRunning = (st: SupervisorState, t: TaskRecord) =>
  Effect.gen(function*() {
    yield* Ref.update(st.cancelRequested, (s) => new Set(s).add(t.task_id))
    const live = (yield* Ref.get(st.live)).get(t.task_id)
    if (live) {
      yield* Deferred.succeed(live.stop, undefined)
      const fiber = yield* FiberMap.get(st.runs, t.task_id).pipe(Effect.option)
      if (Option.isSome(fiber)) {
        const ended = yield* Fiber.await(fiber.value).pipe(Effect.timeout(CANCEL_WAIT), Effect.option)
        if (Option.isNone(ended)) yield* FiberMap.remove(st.runs, t.task_id)
      }
      return
    }
    const held = [...(yield* Ref.get(st.held)).values()].find((h) => h.taskId === t.task_id)
    if (held) {
      yield* killOrSay(held.containerId, `task ${t.task_id} (cancelled)`)
      const fiber = yield* FiberMap.get(st.takeovers, held.containerId).pipe(Effect.option)
      // The kill is done; a take-over still closing after CANCEL_WAIT finishes on its own, its record written then.
      if (Option.isSome(fiber)) yield* Fiber.await(fiber.value).pipe(Effect.timeout(CANCEL_WAIT), Effect.ignore)
      return
    }
    // Running on disk but held by no one here (its box already gone): it ends where it stands.
    yield* cancelInPlace(t)
  })

/** A task of this node's whose cancel another node asked for: its box is stopped as a cancel here would. */
const cancelAsked = (st: SupervisorState, taskId: string) =>
  Effect.gen(function*() {
    if (!(yield* Ref.get(st.live)).has(taskId) || (yield* Ref.get(st.cancelRequested)).has(taskId)) return
    const t = yield* (yield* TaskStore).get(taskId)
    if (t?.status === "running" && t.cancel_requested) {
      yield* Effect.logInfo(`task ${taskId} (${t.worker}): cancelled from node ${t.cancel_requested.on_node}`)
      yield* cancelRunning(st, t)
    }
  })

/**
 * Cancels a task another node of the fleet runs: the request is written on the task (that node
 * sees it by LISTEN, or within 5 s), then the task's end is waited for.
 */
const cancelElsewhere = (t: TaskRecord, node: string) =>
  Effect.gen(function*() {
    const store = yield* TaskStore
    yield* store.update(t.task_id, (x, now) =>
      x.status === "running" && x.node === t.node && !x.cancel_requested ? { ...x, cancel_requested: { at: now, on_node: node } } : x)
    const ended = yield* store.get(t.task_id).pipe(
      Effect.flatMap((x) => (x && x.status !== "running" ? Effect.succeed(x) : Effect.fail("running" as const))),
      Effect.retry(Schedule.spaced("250 millis").pipe(Schedule.upTo(CANCEL_WAIT))),
      Effect.option
    )
    if (Option.isSome(ended)) return ended.value
    return yield* Effect.fail(new TaskRefused({
      detail: `task ${t.task_id} runs on node ${t.node}, which has not stopped it in 30 s (is it lost? roster server status); ` +
        "the request stays on the task, and that node stops its box as soon as it sees it"
    }))
  })

const boxView = (st: SupervisorState, self: Owner) =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const held = yield* Ref.get(st.held)
    // A warm box's label says "warm" for good (labels cannot change): once a run took it, its kind is its run's.
    const pool = yield* Effect.serviceOption(WarmPool)
    const ready = new Set(Option.isSome(pool) ? (yield* pool.value.ready).map((r) => r.runId) : [])
    const runLog = yield* RunLog
    const views: Array<BoxView> = []
    for (const b of yield* deploymentBoxes) {
      const h = held.get(b.id)
      // server status shows what it can: a warm box whose record cannot be read is shown as not taken.
      const taken = b.kind === "warm" && !ready.has(b.runId) ? yield* runLog.read(b.worker, b.runId).pipe(Effect.orElseSucceed(() => undefined)) : undefined
      views.push({
        ...boxFacts(b, now),
        ...(taken ? { kind: taken.kind, task_id: taken.task_id } : {}),
        held_by: h ? (h.how === "adopt" ? "adopted" : "reaping") : b.owner?.pid === self.pid && b.owner.start === self.start ? "daemon" : "owner"
      })
    }
    return views
  })

/** What the API's calls need, captured when the supervisor starts. */
type CallEnv = TaskStore | BoxBackend | Paths | FileSystem.FileSystem | Path.Path | Files | OrgConfig | RunLog

const make = Effect.gen(function*() {
  const store = yield* TaskStore
  // Only the named services: the whole captured context would carry the layer's own Scope along,
  // and a call's finalizer (a held box slot's release) would then wait for the daemon to stop.
  const env = Context.pick(TaskStore, BoxBackend, Paths, FileSystem.FileSystem, Path.Path, Files, OrgConfig, RunLog)(yield* Effect.context<CallEnv>())
  const use = <A, E>(effect: Effect.Effect<A, E, CallEnv>) => Effect.provide(effect, env)
  const org = yield* OrgConfig
  const st = yield* makeState(yield* Clock.currentTimeMillis)
  const self = yield* currentOwner
  const member = yield* Effect.serviceOption(FleetMember)
  const node = Option.isSome(member) ? member.value.node : null
  // A stop's --fail-running was for the daemon it stopped.
  const failsRunning = layout(yield* Paths).stopFailsRunning
  yield* (yield* FileSystem.FileSystem).remove(failsRunning).pipe(Effect.catchAll((e) =>
    isNotFound(e)
      ? Effect.void
      : Effect.logWarning(`the mark of a stop's --fail-running could not be removed (${e.message}): the next daemon's stop would fail its running tasks too — remove it with: rm ${failsRunning}`)
  ))
  // Adoption first, then the queue: a task whose box survived is never started again.
  yield* recover(node)
  // Answers a dead daemon owed (a task that ended just before it died) go out before anything new runs.
  yield* deliverPending(true)
  yield* watchPass(st, self)
  yield* sweepStrays(st).pipe(Effect.catchAllCause((c) => Effect.logError("supervisor: a sweep of boxless runs failed", c)))
  yield* Effect.forkScoped(watchLoop(st, self))
  yield* Effect.forkScoped(strayLoop(st))
  yield* Effect.forkScoped(dispatchLoop(st))
  yield* Effect.forkScoped(archiveLoop)
  const wake = Queue.offer(st.wake, undefined)
  // A fleet's node passes the queue again whenever any node changes a task (added, ended, cancelled),
  // and stops a box of its own whose cancel another node asked for (looked at every 5 s as well).
  if (Option.isSome(member)) {
    const asked = (taskId: string) => use(cancelAsked(st, taskId)).pipe(Effect.catchAllCause((c) => Effect.logError(`task ${taskId}: a cancel could not be carried out`, c)))
    yield* Effect.forkScoped(Stream.runForEach(member.value.changes, (taskId) => wake.pipe(Effect.zipRight(asked(taskId)))))
    yield* Effect.forkScoped(Effect.gen(function*() {
      for (const taskId of (yield* Ref.get(st.live)).keys()) yield* asked(taskId)
    }).pipe(Effect.repeat(Schedule.spaced("5 seconds"))))
    // A node the fleet fenced kills its boxes and joins again (its heartbeat finds the fence).
    yield* Effect.forkScoped(use(leaveFenced(st, member.value)).pipe(
      Effect.catchAllCause((c) => Effect.logError("fleet: a fenced node could not put down its boxes", c)),
      Effect.repeat(Schedule.spaced("1 second"))
    ))
    // A node cut off from the fleet's database stops its boxes before its lease can expire.
    yield* Effect.forkScoped(use(standDown(member.value)).pipe(
      Effect.catchAllCause((c) => Effect.logError("fleet: a node cut off from the database could not stop its boxes", c)),
      Effect.repeat(Schedule.spaced("1 second"))
    ))
  }

  return {
    add: ({ via, ...req }) => use(queueTask(req, { ...PERSON, via: via ?? "api" })).pipe(Effect.tap(() => wake)),
    holdSlot: (worker, key) => holdSlot(st, worker, key).pipe(Effect.provideService(OrgConfig, org)),
    holdWorker: (worker, key, waiting) => holdWorker(st, worker, key, waiting).pipe(Effect.provideService(OrgConfig, org)),
    list: (filter) =>
      use(Effect.gen(function*() {
        const live = yield* store.list
        const archived = filter.all
          ? yield* store.listArchived.pipe(Effect.catchAll((e) => Effect.logWarning(`the archived tasks could not be read: ${e.message}`).pipe(Effect.as([]))))
          : []
        return [...archived, ...live].sort(byQueueOrder).filter((t) =>
          (filter.worker === undefined || t.worker === filter.worker) && (filter.status === undefined || t.status === filter.status))
      })),
    show: (taskId) => use(findTask(taskId)),
    retry: (taskId) => use(retryTask(taskId, hasSession)).pipe(Effect.tap(() => wake)),
    cancel: (taskId) =>
      use(Effect.gen(function*() {
        const t = yield* store.get(taskId)
        if (!t) return yield* Effect.fail(new NoSuchTask({ taskId }))
        if (isFinal(t.status)) return yield* Effect.fail(new TaskRefused({ detail: `task ${taskId} already ended: ${t.status}` }))
        if (t.status === "running" && node !== null && t.node !== undefined && t.node !== node) return yield* cancelElsewhere(t, node)
        const after = yield* store.update(taskId, cancelQueued)
        if (after.status === "running") yield* cancelRunning(st, after)
        yield* wake
        return (yield* store.get(taskId)) ?? after
      })),
    status: use(Effect.gen(function*() {
      const tasks = yield* store.list
      const queue: Record<string, number> = { queued: 0, held: 0, running: 0, done: 0, failed: 0, cancelled: 0 }
      for (const t of tasks) queue[t.status] = (queue[t.status] ?? 0) + 1
      const counts = yield* Ref.get(st.counts)
      const boxes = yield* boxView(st, self).pipe(
        Effect.catchAll((e) => Effect.logWarning(`status: the boxes could not be listed: ${e.message}`).pipe(Effect.as([])))
      )
      return {
        queue,
        boxes,
        warm: boxes.filter((b) => b.kind === "warm").length,
        adopted: counts.adopted,
        reaped: counts.reaped,
        held_reason: (queue.held ?? 0) > 0 ? HOLD_REASON : null
      }
    }))
  } satisfies SupervisorApi
})

/** The daemon's supervisor as a service (see {@link SupervisorApi}); its layer starts the reaper and the dispatch loop with its scope. */
export class Supervisor extends Context.Tag("roster/Supervisor")<Supervisor, SupervisorApi>() {
  /** Starts with its scope: recovers what a dead daemon left, then runs the reaper and the dispatch loop. */
  static readonly layer = Layer.scoped(Supervisor, make)
}
