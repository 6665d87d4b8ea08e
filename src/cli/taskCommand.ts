import { Args, Command, Options } from "@effect/cli"
import { Clock, Console, Effect, Option } from "effect"
import { cancelInPlace, PERSON, queueTask, retryTask } from "../supervisor/queueTask.js"
import { hasSession } from "../supervisor/dispatch.js"
import { validateCeiling } from "../box/ceiling.js"
import { isFinal, NoSuchTask, type TaskRecord, TaskRefused, TaskStatus } from "../task/TaskRecord.js"
import { byQueueOrder, TaskStore } from "../task/TaskStore.js"
import { Paths } from "../config/Paths.js"
import { viaDaemon } from "../api/controlClient.js"
import { visible } from "./terminal.js"
import { BadInput } from "./badInput.js"
import { isTaskId } from "../config/names.js"

const json = Options.boolean("json").pipe(Options.withDescription("print JSON for scripts"))
const taskIdArg = Args.text({ name: "task-id" }).pipe(Args.withDescription("a task id from roster task list (t-xxxxxxxx)"))

const NOT_RUNNING = "note: the roster server is not running — the task waits in the queue until it starts: roster server start"
const NOT_RUNNING_HERE = "note: this node's roster server is not running — the task is in the fleet's queue, for any live node to run (roster server status lists them)"

const short = (s: string, n: number) => {
  const one = s.replace(/\s+/g, " ").trim()
  return visible(one.length > n ? `${one.slice(0, n - 1)}…` : one)
}

const ago = (iso: string, now: number) => {
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000))
  return s < 90 ? `${s}s ago` : s < 5400 ? `${Math.round(s / 60)}m ago` : s < 129600 ? `${Math.round(s / 3600)}h ago` : `${Math.round(s / 86400)}d ago`
}

/** A queued task's status as a person reads it: "waiting" while its run-at time or its retry's backoff has not passed. */
const shownStatus = (t: TaskRecord, now: number) => (t.status === "queued" && t.not_before !== undefined && Date.parse(t.not_before) > now ? "waiting" : t.status)

const line = (t: TaskRecord, now: number) =>
  `${t.task_id}  ${shownStatus(t, now).padEnd(9)}  ${t.worker.padEnd(12)}  ${ago(t.created_at, now).padEnd(8)}  ${short(t.unreadable ? (t.reason ?? "record unreadable") : t.prompt, 60)}`

const queuedBy = (t: TaskRecord) =>
  t.origin.by === "self"
    ? `the worker (run ${t.origin.run_id})`
    : t.origin.by === "chat"
    ? `a chat message${t.origin.chat ? ` by ${visible(t.origin.chat.author)} in ${t.origin.chat.provider} ${visible(t.origin.chat.channel)}` : ""}`
    : `a person${t.origin.via ? ` (${t.origin.via})` : ""}`

/** An option a command may go without, with what it does. */
const optional = <A>(option: Options.Options<A>, description: string) => option.pipe(Options.optional, Options.withDescription(description))

const add = Command.make("add", {
  json,
  worker: Args.text({ name: "worker" }).pipe(Args.withDescription("the worker who does it")),
  prompt: Args.text({ name: "prompt" }).pipe(Args.atLeast(1), Args.withDescription("what the worker should do")),
  ceiling: optional(Options.float("ceiling"), "minutes before its box is killed (default: [box] ceiling_min)"),
  after: optional(Options.text("after"), "run only once this task is done"),
  channel: optional(Options.text("channel"), "serve a channel: its recent messages read-only at /pihome/channel, and a store the worker keeps per channel at /pihome/channel/store"),
  continues: optional(Options.text("continue"), "carry on task <id> of the same worker: its run's pi session is resumed, so the worker remembers that conversation"),
  key: optional(Options.text("key"), "an idempotency key: while a task with this key waits or runs, adding again gives that task back (\"task <id> exists (key K)\", exit 0) instead of a twin"),
  retries: optional(Options.integer("retries"), "try again this many times after a failure that is no person's decision (a failed model call, a lost box, a failed preflight), with a doubling wait; default [supervisor] retries"),
  at: optional(Options.text("at"), "not before this time: 2026-12-24T09:00:00Z, or from now: +30m, +2h, +1d (it waits in the queue until then)"),
  replyTo: optional(Options.text("reply-to"), "where the answer goes when the task ends: talk:<run-id> (a live roster talk), task:<task-id> (that task's record), chat:slack:<channel>[/<thread>] or chat:discord:<channel>[/<thread>] (a [[chat.channel]] org.toml maps), or none")
}, ({ after, at, ceiling, channel, continues, json, key, prompt, replyTo, retries, worker }) =>
  Effect.gen(function*() {
    // Checked here as the daemon checks it, so the person reads the same refusal either way.
    if (Option.isSome(ceiling)) yield* validateCeiling(ceiling.value).pipe(Effect.mapError((e) => new TaskRefused({ detail: e.message })))
    const req = {
      worker,
      prompt: prompt.join(" "),
      ...(Option.isSome(ceiling) ? { ceiling_min: ceiling.value } : {}),
      ...(Option.isSome(after) ? { after: after.value } : {}),
      ...(Option.isSome(channel) ? { channel: channel.value } : {}),
      ...(Option.isSome(continues) ? { continue: continues.value } : {}),
      ...(Option.isSome(replyTo) ? { reply_to: replyTo.value } : {}),
      ...(Option.isSome(key) ? { key: key.value } : {}),
      ...(Option.isSome(retries) ? { retries: retries.value } : {}),
      ...(Option.isSome(at) ? { at: at.value } : {})
    }
    const viaServer = yield* viaDaemon((c) => c.tasks.add({ payload: { ...req, via: "cli" } }))
    const task = Option.isSome(viaServer) ? viaServer.value : yield* queueTask(req, { ...PERSON, via: "cli" })
    if (json) yield* Console.log(JSON.stringify(task, null, 2))
    else yield* Console.log(task.existed ? `task ${task.task_id} exists (key ${visible(task.key ?? "")})` : `task ${task.task_id} queued`)
    if (Option.isNone(viaServer)) yield* Console.error((yield* Paths).fleet ? NOT_RUNNING_HERE : NOT_RUNNING)
  })).pipe(Command.withDescription(
    "Queue a task for a worker: the daemon runs it in a box when its turn comes (at most [supervisor] concurrency at once, " +
      "one per worker). Prints `task <id> queued`. Works while the daemon is down: the task waits for it. " +
      "--continue <id> carries on an earlier task's conversation; --reply-to sends its answer somewhere when it ends. " +
      "Example: roster task add alice --ceiling 20 \"summarise this week's notes\" && roster task list"
  ))

const listTasks = (filter: { readonly worker?: string; readonly status?: TaskStatus; readonly all?: boolean }) =>
  Effect.gen(function*() {
    const viaServer = yield* viaDaemon((c) => c.tasks.list({ urlParams: filter }))
    if (Option.isSome(viaServer)) return viaServer.value
    const store = yield* TaskStore
    const archived = filter.all ? yield* store.listArchived : []
    return [...archived, ...(yield* store.list)].sort(byQueueOrder).filter((t) =>
      (filter.worker === undefined || t.worker === filter.worker) && (filter.status === undefined || t.status === filter.status)
    )
  })

const list = Command.make("list", {
  json,
  worker: optional(Options.text("worker"), "only this worker's tasks"),
  status: Options.choice("status", TaskStatus.literals).pipe(Options.optional, Options.withDescription("only tasks in this state")),
  all: Options.boolean("all").pipe(Options.withDescription("the archived tasks too (finished over [supervisor] keep_days ago, 30 by default)"))
}, ({ all, json, status, worker }) =>
  Effect.gen(function*() {
    const tasks = yield* listTasks({
      ...(Option.isSome(worker) ? { worker: worker.value } : {}),
      ...(Option.isSome(status) ? { status: status.value } : {}),
      ...(all ? { all } : {})
    })
    if (json) return yield* Console.log(JSON.stringify(tasks, null, 2))
    if (tasks.length === 0) return yield* Console.log(`no tasks — queue one: roster task add alice "..."`)
    const now = yield* Clock.currentTimeMillis
    for (const t of tasks) yield* Console.log(line(t, now))
  })).pipe(Command.withDescription("List tasks in queue order (id, status, worker, age, prompt)."))

/** A task id checked against its form before it is used anywhere (a URL's path, a file name). */
const taskIdForm = (taskId: string) =>
  isTaskId(taskId) ? Effect.void : Effect.fail(new BadInput({ detail: `"${visible(taskId)}" is not a task id (t-xxxxxxxx) — list them: roster task list` }))

const findTask = (taskId: string) =>
  Effect.gen(function*() {
    yield* taskIdForm(taskId)
    const viaServer = yield* viaDaemon((c) => c.tasks.show({ path: { id: taskId } }))
    if (Option.isSome(viaServer)) return viaServer.value
    const store = yield* TaskStore
    const t = (yield* store.get(taskId)) ?? (yield* store.getArchived(taskId))
    return t ?? (yield* Effect.fail(new NoSuchTask({ taskId })))
  })

const show = Command.make("show", { json, taskId: taskIdArg }, ({ json, taskId }) =>
  Effect.gen(function*() {
    const t = yield* findTask(taskId)
    if (json) return yield* Console.log(JSON.stringify(t, null, 2))
    yield* Console.log(`task ${t.task_id}  ${t.status}  (worker ${t.worker})${t.archived ? "  archived" : ""}`)
    // A worker's own follow-ups (set_tasks) carry box text: shown, never obeyed by the terminal.
    yield* Console.log(`prompt: ${visible(t.prompt)}`)
    yield* Console.log(`queued ${t.created_at} by ${queuedBy(t)}` +
      `${t.after ? `, after ${t.after}` : ""}${t.channel ? `, channel ${t.channel}` : ""}${t.ceiling_min ? `, ceiling ${t.ceiling_min} min` : ""}`)
    if (t.continues) yield* Console.log(`continues: ${t.continues.task_id ?? ""}${t.continues.run_id ? ` (run ${t.continues.run_id})` : ""}`)
    if (t.continued_by && t.continued_by.length > 0) yield* Console.log(`continued by: ${t.continued_by.join(", ")}`)
    if (t.reply_to) {
      yield* Console.log(`reply to: ${visible(t.reply_to)}${t.delivery ? ` — ${t.delivery.ok ? "delivered" : `not delivered (${visible(t.delivery.error ?? "")})`} ${t.delivery.at}` : ""}`)
    }
    for (const r of t.replies ?? []) yield* Console.log(`reply from ${r.from_task} (${r.worker}, ${r.status}, ${r.at}): ${visible(short(r.text, 200))}`)
    if (t.started_at) yield* Console.log(`started ${t.started_at}`)
    if (t.finished_at) yield* Console.log(`finished ${t.finished_at}: ended by ${t.ended_by ?? "-"} (exit code ${t.exit_code ?? "none"})${t.adopted ? ", adopted after a daemon restart" : ""}`)
    if (t.reason) yield* Console.log(`reason: ${visible(t.reason)}`)
    if (t.not_before && t.status === "queued") yield* Console.log(`waits until ${t.not_before}`)
    if (t.retries !== undefined) yield* Console.log(`retries: ${t.retries}`)
    if (t.interrupted) yield* Console.log(`interrupted: run ${t.interrupted.run_id} by ${t.interrupted.by === "stop" ? "roster server stop" : "the daemon dying with its box"} at ${t.interrupted.at}`)
    for (const [i, a] of (t.attempts ?? []).entries()) {
      yield* Console.log(`attempt ${i + 1}: run ${a.run_id} ended by ${a.ended_by} at ${a.at}${a.reason ? `: ${visible(a.reason)}` : ""}`)
    }
    for (const r of t.run_ids) yield* Console.log(`run: ${r}  (roster runs show ${r})`)
    if (t.final_text) yield* Console.log(`\n${visible(t.final_text.trimEnd())}`)
  })).pipe(Command.withDescription("Show a task: its state, prompt, runs and how it ended."))

/** With no daemon, a task is cancelled where it stands (a box still running for it is killed by name). */
const cancelDirect = (taskId: string) =>
  Effect.gen(function*() {
    const t = yield* (yield* TaskStore).get(taskId)
    if (!t) return yield* Effect.fail(new NoSuchTask({ taskId }))
    if (isFinal(t.status)) return yield* Effect.fail(new TaskRefused({ detail: `task ${taskId} already ended: ${t.status}` }))
    return yield* cancelInPlace(t)
  })

const cancel = Command.make("cancel", { json, taskId: taskIdArg }, ({ json, taskId }) =>
  Effect.gen(function*() {
    yield* taskIdForm(taskId)
    const viaServer = yield* viaDaemon((c) => c.tasks.cancel({ path: { id: taskId } }))
    const t = Option.isSome(viaServer) ? viaServer.value : yield* cancelDirect(taskId)
    if (json) return yield* Console.log(JSON.stringify(t, null, 2))
    yield* Console.log(`task ${t.task_id} ${t.status}`)
  })).pipe(Command.withDescription("Cancel a task: a queued one never runs; a running one's box is killed (its record says cancelled)."))

/** With no daemon, a failed task is put back where it stands (the next daemon runs it). */
const retry = Command.make("retry", { json, taskId: taskIdArg }, ({ json, taskId }) =>
  Effect.gen(function*() {
    yield* taskIdForm(taskId)
    const viaServer = yield* viaDaemon((c) => c.tasks.retry({ path: { id: taskId } }))
    const t = Option.isSome(viaServer) ? viaServer.value : yield* retryTask(taskId, hasSession)
    if (json) return yield* Console.log(JSON.stringify(t, null, 2))
    yield* Console.log(`task ${t.task_id} queued again${t.continues?.task_id === t.task_id ? ` (carrying on from run ${t.continues.run_id})` : ""}`)
  })).pipe(Command.withDescription(
    "Try a failed or cancelled task again: back in the queue in its place, carrying on from its last run (its pi session resumed). Example: roster task retry t-1a2b3c4d"
  ))

export const taskCommand = Command.make("task").pipe(
  Command.withDescription("Queue work for the daemon to run unattended, and follow it."),
  Command.withSubcommands([add, list, show, cancel, retry])
)
