import { Effect, Either, Schema } from "effect"
import { OrgConfig } from "../../config/OrgConfig.js"
import { RunLog } from "../../run/RunLog.js"
import { holdsKey, TaskKey, type TaskRecord, TaskRefused } from "../../task/TaskRecord.js"
import { TaskStore } from "../../task/TaskStore.js"
import { linkContinuation } from "../../task/links.js"
import { checkReplyTo } from "../../reply/replyTo.js"
import { inheritedPlace } from "../../contract/replyPlaces.js"
import { readRunContext } from "../../run/runContext.js"
import type { ActionAnswer, BoxCaller } from "./actionTypes.js"

import { ceilingProblem } from "../../config/ceiling.js"

const MAX_PROMPT = 8000

const SetTasks = Schema.parseJson(Schema.Struct({
  /** Optional, and then it must be the caller: a worker queues work only for itself. */
  worker: Schema.optional(Schema.String),
  tasks: Schema.Array(Schema.Struct({
    prompt: Schema.String,
    ceiling_min: Schema.optional(Schema.Number),
    after: Schema.optional(Schema.String),
    /** Carry on this run's own conversation: the follow-up resumes its pi session. */
    continue: Schema.optional(Schema.Boolean),
    /** Where the follow-up's answer goes; by default wherever this run's own answer goes. */
    reply_to: Schema.optional(Schema.String),
    /** An idempotency key: while a task with it waits or runs, that task is the answer (no twin queued). */
    key: Schema.optional(TaskKey)
  }))
}))

const refused = (status: number, error: string): ActionAnswer => ({ status, body: { ok: false, error } })

const waitingSelfTasks = (all: ReadonlyArray<TaskRecord>, worker: string) =>
  all.filter((t) => t.worker === worker && t.origin.by === "self" && (t.status === "queued" || t.status === "held")).length

/**
 * set_tasks: a worker queues follow-up tasks for itself. The worker, run and task come from the
 * run token (never the body); another worker is refused; at most `[supervisor] max_self_tasks`
 * of its own may wait at once, checked under the store's lock. The new tasks name their origin
 * run and task, and the run's record (and its task's) lists what it queued.
 */
export const setTasks = (caller: BoxCaller, body: string) =>
  Effect.gen(function*() {
    const decoded = Schema.decodeUnknownEither(SetTasks)(body)
    if (Either.isLeft(decoded)) {
      return refused(400, `the body is {"tasks": [{"prompt": "...", "ceiling_min"?: n, "after"?: "t-...", "continue"?: true, "reply_to"?: "task:t-..."}]}`)
    }
    const req = decoded.right
    if (req.worker !== undefined && req.worker !== caller.worker) {
      yield* Effect.logWarning(`gateway: run ${caller.runId} of ${caller.worker} tried to queue a task for ${req.worker}: refused`)
      return refused(403, `a worker queues tasks only for itself (you are ${caller.worker})`)
    }
    const store = yield* TaskStore
    for (const t of req.tasks) {
      if (t.prompt.trim() === "" || t.prompt.length > MAX_PROMPT) return refused(400, `a prompt is 1 to ${MAX_PROMPT} characters`)
      const badCeiling = t.ceiling_min === undefined ? undefined : ceilingProblem(t.ceiling_min)
      if (badCeiling) return refused(400, `ceiling_min: ${badCeiling}`)
      if (t.after !== undefined && (yield* store.get(t.after))?.worker !== caller.worker) return refused(400, `after: ${t.after} is not one of your tasks`)
    }
    // A follow-up answers where this run answers, unless the worker names another of its own places.
    const context = yield* readRunContext(caller.worker, caller.runId)
    const inherited = inheritedPlace(context)
    const replies: Array<string | undefined> = []
    for (const t of req.tasks) {
      const wanted = t.reply_to ?? inherited ?? undefined
      if (wanted === undefined) {
        replies.push(undefined)
        continue
      }
      const checked = yield* checkReplyTo(wanted, { _tag: "run", runId: caller.runId, context }).pipe(Effect.either)
      if (Either.isLeft(checked)) {
        if (checked.left.notOwn) yield* Effect.logWarning(`gateway: run ${caller.runId} of ${caller.worker} named a reply place not its own: ${checked.left.detail}`)
        return refused(checked.left.notOwn ? 403 : 400, checked.left.message)
      }
      replies.push(checked.right)
    }
    // A keyed follow-up whose key a task of this worker's still waiting or running holds is that task.
    // A key is the worker's own: another worker's task under the same key is neither found nor said to exist.
    const mine = (yield* store.list).filter((t) => t.worker === caller.worker)
    const twinOf = (key: string | undefined) => mine.find((t) => holdsKey(t, caller.worker, key))
    const org = yield* (yield* OrgConfig).snapshot.pipe(Effect.either)
    if (Either.isLeft(org)) return refused(500, `the deployment's org.toml cannot be read: ${org.left.message}`)
    const max = org.right.supervisor.max_self_tasks
    // Work a chat session queues is charged to its channel's budget too, and so is the work that work queues.
    const origin = { by: "self" as const, run_id: caller.runId, task_id: caller.taskId, ...(caller.chatChannel ? { chat_channel: caller.chatChannel } : {}) }
    const fresh = req.tasks.map((t, i) => ({ t, i })).filter(({ t }) => twinOf(t.key) === undefined)
    const added = yield* store.addAll(
      fresh.map(({ i, t }) => ({
        worker: caller.worker,
        prompt: t.prompt,
        ceilingMin: t.ceiling_min ?? null,
        after: t.after ?? null,
        origin,
        // This run's own session, resumed once this run has ended.
        ...(t.continue ? { continues: { task_id: caller.taskId, run_id: caller.runId } } : {}),
        replyTo: replies[i],
        key: t.key
      })),
      (all) => {
        const raced = fresh.find(({ t }) => all.some((x) => holdsKey(x, caller.worker, t.key)))
        if (raced) return new TaskRefused({ detail: `key ${raced.t.key} is in use by a task that waits or runs: set_tasks again to get it` })
        const waiting = waitingSelfTasks(all, caller.worker)
        return waiting + fresh.length > max
          ? new TaskRefused({ detail: `at most ${max} tasks you queued may wait at once ([supervisor] max_self_tasks); ${waiting} already wait` })
          : undefined
      }
    ).pipe(Effect.either)
    if (Either.isLeft(added)) {
      return added.left._tag === "TaskRefused" ? refused(429, added.left.message) : refused(500, "the tasks could not be recorded")
    }
    const made = added.right.map((t) => t.task_id)
    if (made.length > 0) yield* recordQueued(caller, made)
    // In the order asked: each new task's id, or the id of the task its key already names.
    let next = 0
    const ids = req.tasks.map((t) => twinOf(t.key)?.task_id ?? made[next++] ?? "")
    if (caller.taskId) {
      for (const t of added.right) if (t.continues) yield* linkContinuation(caller.taskId, t.task_id)
    }
    return { status: 200, body: { ok: true, queued: ids } } satisfies ActionAnswer
  })

const recordQueued = (caller: BoxCaller, ids: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const runLog = yield* RunLog
    const run = yield* runLog.read(caller.worker, caller.runId)
    yield* runLog.update(caller.worker, caller.runId, { queued_tasks: [...(run?.queued_tasks ?? []), ...ids] })
    if (caller.taskId) {
      yield* (yield* TaskStore).update(caller.taskId, (t) => ({ ...t, queued_tasks: [...(t.queued_tasks ?? []), ...ids] }))
    }
  }).pipe(Effect.catchAll((e) => Effect.logWarning(`gateway: run ${caller.runId}: the tasks it queued could not be noted: ${e.message}`)))
