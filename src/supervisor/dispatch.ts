import { FileSystem } from "@effect/platform"
import { Cause, Clock, type Context, Deferred, Effect, Exit, FiberMap, Option, Queue, Ref, Schedule } from "effect"
import { Paths, layout } from "../config/Paths.js"
import { runFiles } from "../contract/runFiles.js"
import { modelCredentialAvailable } from "../box/pihome.js"
import type { RunOutcome } from "../box/runOnce.js"
import { Runner } from "../runner/Runner.js"
import { OrgConfig } from "../config/OrgConfig.js"
import { FleetMember } from "../fleet/FleetMember.js"
import { causeText } from "../run/causeText.js"
import { newRunId } from "../run/runId.js"
import { RunLog } from "../run/RunLog.js"
import { isFinal, type TaskRecord } from "../task/TaskRecord.js"
import { TaskStore } from "../task/TaskStore.js"
import { deliverPending, deliverReply } from "./deliver.js"
import { type SupervisorState, withKey, withoutKey } from "./state.js"
import { attemptOf, REQUEUE_HINT, requeueInterrupted, requeueRetry, retryable, retryWaitMs, type RunEnded, taskEnd, taskFailed } from "./taskEnd.js"

export const HOLD_REASON = "no model credential: nothing would answer the worker — connect one: roster connection add anthropic (a key) or roster connection login anthropic (a Claude subscription) " +
  "(a host pi login or ANTHROPIC_API_KEY in the daemon's environment also count); the queue resumes by itself"

const hold = (t: TaskRecord): TaskRecord => (t.status === "queued" ? { ...t, status: "held", reason: HOLD_REASON } : t)
const unhold = (t: TaskRecord): TaskRecord => (t.status === "held" ? { ...t, status: "queued", reason: null } : t)

/** Whether a queued task's `after` lets it start now, must wait, or can never run. */
const afterState = (t: TaskRecord, all: ReadonlyArray<TaskRecord>): "ready" | "waiting" | { readonly fail: string } => {
  if (t.after === null) return "ready"
  const before = all.find((x) => x.task_id === t.after)
  if (!before) return { fail: `it waits for task ${t.after}, which no longer exists` }
  if (before.status === "done") return "ready"
  if (before.status === "failed" || before.status === "cancelled") return { fail: `it waits for task ${t.after}, which ended ${before.status}` }
  return "waiting"
}

/** Where a continuation stands: the run it resumes, waiting for that run to end, or never. */
const continuesState = (t: TaskRecord, all: ReadonlyArray<TaskRecord>) =>
  Effect.gen(function*() {
    if (!t.continues) return { ready: null } as const
    const of = t.continues.task_id === null ? undefined : all.find((x) => x.task_id === t.continues?.task_id)
    const runId = t.continues.run_id ?? of?.run_ids.at(-1) ?? null
    if (runId === null) {
      return of && !isFinal(of.status) ? "waiting" as const : { fail: `it continues task ${t.continues.task_id}, which ended without a run to continue` }
    }
    const run = yield* (yield* RunLog).read(t.worker, runId)
    if (!run) return { fail: `it continues run ${runId}, which has no record` }
    if (run.finished_at === null) return "waiting" as const
    return { ready: { task_id: t.continues.task_id, run_id: runId } } as const
  })

/**
 * A run the daemon's stop (or its death: "restart") interrupted: the task is put back to carry on
 * (`[supervisor] on_interrupt = "resume"`, unless this stop is `roster server stop --fail-running`);
 * undefined: it fails, as before.
 */
export const interruptedEnd = (worker: string, runId: string, by: "stop" | "cut-off" | "restart" = "stop") =>
  Effect.gen(function*() {
    const org = yield* (yield* OrgConfig).snapshot.pipe(Effect.option)
    if (Option.isSome(org) && org.value.supervisor.on_interrupt === "fail") return undefined
    if (by === "stop" && (yield* failsRunning)) return undefined
    return requeueInterrupted(runId, by, yield* hasSession(worker, runId))
  })

/**
 * How a run's end leaves its task: failed by no person's decision with tries left — back in the
 * queue after its backoff (`[supervisor] retries`, or the task's own); past its tries failed with
 * every attempt's reason; else as taskEnd says. Every ended run is an attempt on the record.
 */
const attemptEnd = (worker: string, end: RunEnded, cancelled: boolean) =>
  Effect.gen(function*() {
    const org = yield* (yield* OrgConfig).snapshot.pipe(Effect.option)
    const policy = Option.match(org, { onNone: () => ({ retries: 0, retry_backoff_s: 30 }), onSome: (o) => o.supervisor })
    const resumable = retryable(end) && !cancelled ? yield* hasSession(worker, end.runId) : false
    return (x: TaskRecord, now: string): TaskRecord => {
      const ended = taskEnd(end, cancelled)(x, now)
      if (ended.status !== "failed" || !retryable(end)) return { ...ended, attempts: [...(x.attempts ?? []), attemptOf(end, now, ended.reason)] }
      const failures = (x.attempts ?? []).filter((a) => a.reason !== null).length + 1
      const allowed = x.retries ?? policy.retries
      if (failures <= allowed) return requeueRetry(end, ended.reason ?? "it failed", retryWaitMs(policy.retry_backoff_s, failures), resumable)(x, now)
      const attempts = [...(x.attempts ?? []), attemptOf(end, now, ended.reason)]
      const failed = attempts.filter((a) => a.reason !== null)
      return failed.length <= 1 ? { ...ended, attempts } : {
        ...ended,
        attempts,
        reason: `failed after ${failed.length} attempts: ${failed.map((a, i) => `${i + 1}. ${a.reason}`).join("; ")}`
      }
    }
  })

/** Whether this stop was asked to fail the running tasks (roster server stop --fail-running). */
export const failsRunning = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  // Not known to be asked is not asked: the running tasks carry on after the start, the default.
  return yield* fs.exists(layout(yield* Paths).stopFailsRunning).pipe(Effect.orElseSucceed(() => false))
})

/** A run got far enough to be continued: its Start context (and so its pi session id) was written. */
export const hasSession = (worker: string, runId: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    // A context that cannot be looked at is not continued: its task starts again from its prompt, and the run's record stays.
    return yield* fs.exists(runFiles(layout(yield* Paths).runDir(worker, runId)).context).pipe(Effect.orElseSucceed(() => false))
  })

const endOf = (runId: string, exit: Exit.Exit<RunOutcome, unknown>, cancelled: boolean): RunEnded =>
  Exit.isSuccess(exit)
    ? { runId, endedBy: exit.value.endedBy, exitCode: exit.value.exitCode, error: exit.value.error, finalText: exit.value.finalText, ceilingMin: exit.value.ceilingMin }
    : Cause.isInterruptedOnly(exit.cause)
    ? { runId, endedBy: "signal", exitCode: null, error: cancelled ? null : `the daemon stopped while it ran (its box was killed); ${REQUEUE_HINT}` }
    : { runId, endedBy: "error", exitCode: null, error: causeText(exit.cause) }

/** How long a run's end waits for a store that does not answer: backing off to every 10 s, for half an hour. */
const END_RETRY = Schedule.exponential("500 millis").pipe(Schedule.union(Schedule.spaced("10 seconds")), Schedule.upTo("30 minutes"))

/** One task's run, as the daemon's fiber: however it ends (even the daemon stopping) the task gets its end. */
const runTask = (
  st: SupervisorState,
  t: TaskRecord,
  runId: string,
  stop: Deferred.Deferred<void>,
  continues: { readonly task_id: string | null; readonly run_id: string } | null
) =>
  // A fresh run takes its worker's warm box on this node (the Runner hands it over under the claim's run id).
  Effect.flatMap(Runner, (runner) => runner.once({
    worker: t.worker,
    prompt: t.prompt,
    ...(t.ceiling_min !== null ? { ceilingMin: t.ceiling_min } : {}),
    taskId: t.task_id,
    runId,
    stop: Deferred.await(stop),
    channel: t.channel ?? null,
    origin: { _tag: "queue", task_id: t.task_id, queued_by: t.origin },
    replyTo: t.reply_to ?? null,
    continues,
    interrupted: t.interrupted ?? null
  })).pipe(
    Effect.onExit((exit) =>
      Effect.gen(function*() {
        const cancelled = (yield* Deferred.isDone(stop)) || (yield* Ref.get(st.cancelRequested)).has(t.task_id)
        const end = endOf(runId, exit, cancelled)
        // Interrupted by roster itself (the daemon stopping), not by a person: the task carries on after the restart.
        // Stopped by its own node, cut off from the fleet's database: the same, whichever node takes it next.
        const resumes = Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause) && !cancelled
          ? yield* interruptedEnd(t.worker, runId)
          : end.endedBy === "cut-off" && !cancelled
          ? yield* interruptedEnd(t.worker, runId, "cut-off")
          : undefined
        const ends = resumes ?? (yield* attemptEnd(t.worker, end, cancelled))
        // A store that cannot be written now (a fleet's database down) gets the end when it answers again.
        // Only this attempt's end is written: a fenced attempt's task is already another's.
        const task = yield* (yield* TaskStore).update(t.task_id, (x, now) =>
          x.status === "running" && x.run_ids.at(-1) === runId ? ends(x, now) : x).pipe(
          Effect.tapError((e) => Effect.logWarning(`task ${t.task_id}: its end cannot be recorded yet (${e.message}); retrying`)),
          Effect.retry({ schedule: END_RETRY, while: (e) => e._tag === "TaskStoreError" })
        )
        if (task.status === "queued" && task.interrupted?.run_id === runId) {
          return yield* Effect.logInfo(
            task.interrupted.by === "cut-off"
              ? `task ${t.task_id} (${t.worker}): its box was stopped while this node was cut off from the fleet's database; it carries on from run ${runId}`
              : `task ${t.task_id} (${t.worker}): the daemon stopped during run ${runId}; it carries on from there after the next start`
          )
        }
        if (task.status === "queued") return yield* Effect.logWarning(`task ${t.task_id} (${t.worker}): ${task.reason ?? "tried again"}`)
        if (task.run_ids.at(-1) !== runId || task.finished_at === null) {
          return yield* Effect.logWarning(`task ${t.task_id} (${t.worker}): run ${runId} ended after the fleet fenced it; the task is ${task.status} there`)
        }
        yield* (task.status === "done" ? Effect.logInfo : Effect.logWarning)(
          `task ${t.task_id} (${t.worker}) ${task.status}${task.reason ? `: ${task.reason}` : ""}`
        )
        // Its answer (or how it failed) goes where it was asked to, once; a crash before this is made up at the next start.
        yield* deliverReply(task)
      }).pipe(
        Effect.catchAllCause((c) => Effect.logError(`task ${t.task_id}: its end could not be recorded`, c)),
        Effect.ensuring(Ref.update(st.live, (m) => withoutKey(m, t.task_id)).pipe(Effect.zipRight(Queue.offer(st.wake, undefined))))
      )
    ),
    // Its end is recorded (and logged) above; the fiber's own cause goes to the debug log only.
    Effect.catchAllCause((cause) => Effect.logDebug(`task ${t.task_id}: its fiber ended`, cause))
  )

/** Starts a claimed task's run as a fiber keyed by the task id. */
const launch = (
  st: SupervisorState,
  t: TaskRecord,
  runId: string,
  continues: { readonly task_id: string | null; readonly run_id: string } | null
) =>
  Effect.gen(function*() {
    const stop = yield* Deferred.make<void>()
    yield* Ref.update(st.live, (m) => withKey(m, t.task_id, { taskId: t.task_id, worker: t.worker, runId, stop }))
    yield* FiberMap.run(st.runs, t.task_id, runTask(st, t, runId, stop, continues))
    yield* Effect.logInfo(`task ${t.task_id} (${t.worker}) started: run ${runId}`)
  })

/**
 * Claims a queued task — its run id minted and written as running before any box exists, as a fleet's
 * claim writes it — and starts its run as a fiber keyed by the task id (a fresh run takes its worker's
 * warm box there, under that id). A crash after the claim leaves a running task whose box is missing,
 * which the next start puts back in the queue rather than running twice.
 */
const start = (st: SupervisorState, t: TaskRecord, continues: { readonly task_id: string | null; readonly run_id: string } | null) =>
  Effect.gen(function*() {
    const runId = yield* newRunId
    const claimed = yield* (yield* TaskStore).update(t.task_id, (x, now) =>
      x.status === "queued" ? { ...x, status: "running", reason: null, started_at: now, run_ids: [...x.run_ids, runId] } : x)
    if (claimed.status !== "running" || claimed.run_ids.at(-1) !== runId) return false
    yield* launch(st, t, runId, continues)
    return true
  })

/** A claim the statement made too early (a continuation whose run's end the fleet's index had not seen): the task goes back as it was. */
const unclaim = (t: TaskRecord, runId: string) =>
  Effect.flatMap(TaskStore, (store) =>
    store.update(t.task_id, (x) =>
      x.status === "running" && x.run_ids.at(-1) === runId ? { ...x, status: "queued", started_at: t.started_at, run_ids: x.run_ids.slice(0, -1) } : x))

/**
 * A fleet node's pass: each claim is the store's one statement (the next runnable task, rows
 * another node holds skipped), until this node's slots are full or nothing is runnable — no read
 * of the queue. Tasks that can never run are failed by a statement of their own.
 */
const fleetPass = (st: SupervisorState, claimNext: NonNullable<Context.Tag.Service<TaskStore>["claimNext"]>, free: number, busy: Set<string>) =>
  Effect.gen(function*() {
    const store = yield* TaskStore
    const member = Option.getOrUndefined(yield* Effect.serviceOption(FleetMember))
    if (store.failStuck) yield* store.failStuck
    for (let left = free; left > 0;) {
      const runId = yield* newRunId
      const t = yield* claimNext({ busy: [...busy], runId })
      if (!t) return
      // A box row taken by another box of the worker (a chat session) as this claim was made: it waits.
      if (member && (yield* member.boxElsewhere(t.worker))) {
        yield* unclaim(t, runId)
        busy.add(t.worker)
        continue
      }
      const continued = t.continues?.task_id && t.continues.task_id !== t.task_id ? yield* store.get(t.continues.task_id) : undefined
      const resumes = yield* continuesState(t, continued ? [t, continued] : [t])
      if (resumes === "waiting") {
        yield* unclaim(t, runId)
        busy.add(t.worker)
        continue
      }
      if ("fail" in resumes) {
        yield* store.update(t.task_id, (x, now) => (x.run_ids.at(-1) === runId ? taskFailed(resumes.fail ?? "it cannot start")(x, now) : x))
        continue
      }
      // A fresh run takes this node's warm box of its worker in its run (the Runner's), under the claim's run id.
      yield* launch(st, t, runId, resumes.ready)
      busy.add(t.worker)
      left--
    }
  })

/**
 * One pass of the queue: hold it while no model credential exists (and release it when one
 * appears), then start queued tasks in order, at most `[supervisor] concurrency` boxes at once
 * and one per worker (an adopted task box counts).
 */
export const dispatchPass = (st: SupervisorState) =>
  Effect.gen(function*() {
    const store = yield* TaskStore
    yield* deliverPending()
    // A node the fleet fenced takes nothing until it has put its boxes down and joined again; one
    // cut off from the fleet's database, or whose last beat is too old to know its lease holds (a
    // process thawed from a freeze), nothing until a heartbeat lands again.
    const member = yield* Effect.serviceOption(FleetMember)
    if (Option.isSome(member) && ((yield* member.value.fenced) || (yield* member.value.cutOff) || (yield* member.value.leaseInDoubt))) return
    const org = yield* (yield* OrgConfig).snapshot
    const credential = yield* modelCredentialAvailable
    // A node of a fleet without a credential only takes nothing: the queue is every node's, and
    // another node may have one.
    if (org.cluster === undefined) {
      for (const t of yield* store.list) {
        if (t.status === "queued" && !credential) yield* store.update(t.task_id, hold)
        if (t.status === "held" && credential) yield* store.update(t.task_id, unhold)
      }
    }
    if (!credential) return
    const here = yield* boxesHere(st)
    if (store.claimNext) return yield* fleetPass(st, store.claimNext, org.supervisor.concurrency - here.slots, here.workers)
    const all = yield* store.list
    // A worker whose task runs anywhere (another node of a fleet included) is busy here too.
    const busy = new Set([...here.workers, ...all.filter((t) => t.status === "running").map((t) => t.worker)])
    let free = org.supervisor.concurrency - here.slots
    const now = yield* Clock.currentTimeMillis
    for (const t of all) {
      if (free <= 0) break
      if (t.status !== "queued" || busy.has(t.worker)) continue
      // A run-at time (task add --at) or a retry's backoff not yet passed: it waits, and holds nothing.
      if (t.not_before !== undefined && Date.parse(t.not_before) > now) continue
      const after = afterState(t, all)
      if (after === "waiting") continue
      const resumes = after === "ready" ? yield* continuesState(t, all) : after
      if (resumes === "waiting") continue
      if ("fail" in resumes) {
        const why = resumes.fail ?? "it cannot start"
        yield* store.update(t.task_id, (x, now) => (x.status === "queued" ? taskFailed(why)(x, now) : x))
        continue
      }
      if (yield* start(st, t, resumes.ready)) {
        free--
        busy.add(t.worker)
      }
    }
  })

/**
 * This node's boxes: the workers that have one (a task's, adopted or live; a chat session's; a
 * person's run), and how many `[supervisor] concurrency` slots they take (a person's run takes none).
 */
const boxesHere = (st: SupervisorState) =>
  Effect.gen(function*() {
    const live = [...(yield* Ref.get(st.live)).values()]
    const adopted = [...(yield* Ref.get(st.held)).values()].filter((h) => h.taskId !== null)
    const others = [...(yield* Ref.get(st.sessions)).values()]
    return {
      workers: new Set([...live, ...adopted, ...others].map((x) => x.worker)),
      slots: live.length + adopted.length + others.filter((o) => o.counts).length
    }
  })

/**
 * Holds a box slot for a box that is not a task's (a chat session's) until the scope closes:
 * waits while `[supervisor] concurrency` boxes run or the worker already has one, then counts
 * toward both rules, so a task of that worker waits until the session ends.
 */
export const holdSlot = (st: SupervisorState, worker: string, runKey: string) => holdOtherBox(st, worker, runKey, true, () => Effect.void)

/**
 * Holds a person's handed-over run's place as its worker's one box on this node until the scope
 * closes: waits, saying so once through `waiting`, while the worker has a box here (a task, a chat
 * session, another such run); takes no concurrency slot (a person's run is not queued work), but
 * keeps the worker's tasks and sessions waiting. The fleet's side is the run's own (its box row).
 */
export const holdWorker = (st: SupervisorState, worker: string, runKey: string, waiting: (text: string) => Effect.Effect<void>) =>
  holdOtherBox(st, worker, runKey, false, waiting)

const holdOtherBox = (st: SupervisorState, worker: string, runKey: string, counts: boolean, waiting: (text: string) => Effect.Effect<void>) =>
  Effect.gen(function*() {
    // In a fleet a session's box row too, taken after this node's slot: a task of that worker
    // running on another node keeps the session waiting, and the session keeps its tasks waiting
    // everywhere. (A person's run takes its row itself, in the Runner.)
    const member = counts ? yield* Effect.serviceOption(FleetMember) : Option.none()
    const fleetRow = Option.match(member, {
      onNone: () => Effect.succeed(true),
      onSome: (m) =>
        m.takeBox(worker, runKey).pipe(Effect.catchAllCause((c) => Effect.logWarning(`fleet: ${worker}'s box row could not be taken (tried again)`, c).pipe(Effect.as(false))))
    })
    let said = false
    yield* Effect.acquireRelease(
      Effect.gen(function*() {
        for (;;) {
          const taken = yield* st.slots.withPermits(1)(Effect.gen(function*() {
            // An org.toml that does not read holds to one box at a time (the default) until it does.
            const org = yield* (yield* OrgConfig).snapshot.pipe(Effect.orElseSucceed(() => undefined))
            const here = yield* boxesHere(st)
            if (here.workers.has(worker)) return "worker" as const
            if (counts && here.slots >= (org?.supervisor.concurrency ?? 1)) return "full" as const
            if (!(yield* fleetRow)) return "fleet" as const
            yield* Ref.update(st.sessions, (m) => withKey(m, runKey, { worker, counts }))
            return "taken" as const
          }))
          if (taken === "taken") return
          if (taken === "worker" && !said) yield* waiting(`${worker} has a box running (one box per worker): this run starts when it ends`)
          said ||= taken === "worker"
          // The wait is interruptible (a person's Ctrl-C, the daemon's stop), the taking is not: a place taken is given back.
          yield* Effect.interruptible(Effect.sleep("1 second"))
        }
      }),
      () =>
        Ref.update(st.sessions, (m) => withoutKey(m, runKey)).pipe(
          Effect.zipRight(Queue.offer(st.wake, undefined)),
          Effect.zipRight(Option.match(member, { onNone: () => Effect.void, onSome: (m) => m.giveBox(worker, runKey) }))
        )
    )
  })

/** The dispatch loop: a pass at each wake-up (a task added, cancelled or ended) and every 2 s. */
export const dispatchLoop = (st: SupervisorState) =>
  Effect.gen(function*() {
    // A failure that repeats pass after pass (a store that does not answer) is logged once, and its end once.
    const last = yield* Ref.make<string | null>(null)
    return yield* st.slots.withPermits(1)(dispatchPass(st)).pipe(
      Effect.zipRight(Ref.getAndSet(last, null).pipe(
        Effect.flatMap((was) => (was === null ? Effect.void : Effect.logInfo("supervisor: dispatch passes work again")))
      )),
      Effect.catchAllCause((c) =>
        Ref.getAndSet(last, Cause.pretty(c)).pipe(
          Effect.flatMap((was) => (was === Cause.pretty(c) ? Effect.void : Effect.logError("supervisor: a dispatch pass failed", c)))
        )),
      Effect.zipRight(Effect.raceFirst(Queue.take(st.wake), Effect.sleep("2 seconds"))),
      Effect.forever
    )
  })

