import { FileSystem, Path } from "@effect/platform"
import { Clock, Effect, Option } from "effect"
import { type HostFiles, Paths, layout } from "../config/Paths.js"
import type { InboxLine } from "../contract/inbox.js"
import { parseReplyTo, type ReplyTarget } from "../contract/origin.js"
import type { OrgConfig } from "../config/OrgConfig.js"
import type { Vault } from "../vault/Vault.js"
import { ownerAlive } from "../contract/owner.js"
import { Files } from "../fs/Files.js"
import { FleetMember } from "../fleet/FleetMember.js"
import { postChat } from "../gateway/actions/chat/postChat.js"
import { appendJournal } from "../journal/journal.js"
import { findRun } from "../run/query.js"
import { RunFence } from "../run/RunFence.js"
import type { RunIndex } from "../run/RunIndex.js"
import type { TaintLog } from "../run/TaintLog.js"
import { isFinal, type TaskRecord } from "../task/TaskRecord.js"
import { TaskStore } from "../task/TaskStore.js"

/** The most of an answer a delivery carries (a whole transcript is the run's, not the reply's). */
const REPLY_MAX = 16_000

/** What a task's end says to where its answer goes: its final answer, or how it failed and why. */
export const replyText = (t: TaskRecord) => {
  const said = t.status === "done"
    ? t.final_text ?? "(the task ended without a final answer)"
    : `task ${t.task_id} of ${t.worker} ${t.status}${t.reason ? `: ${t.reason}` : ""}${t.final_text ? `\nIts last words: ${t.final_text}` : ""}`
  return said.length > REPLY_MAX ? `${said.slice(0, REPLY_MAX)} …[cut: the whole answer is on task ${t.task_id}]` : said
}

/** A task whose answer has somewhere to go and has not been delivered. */
export const awaitsDelivery = (t: TaskRecord) =>
  isFinal(t.status) && !t.unreadable && t.reply_to !== undefined && t.reply_to !== null && t.reply_to !== "none" && t.delivery === undefined

/** Appends the answer to another task's record (once per delivering task) and that worker's journal. */
const toTask = (t: TaskRecord, targetId: string, text: string, at: string) =>
  Effect.gen(function*() {
    const store = yield* TaskStore
    const target = yield* store.get(targetId)
    if (!target || target.unreadable) return yield* Effect.fail(`there is no task ${targetId}`)
    if ((target.replies ?? []).some((r) => r.from_task === t.task_id)) return
    yield* store.update(targetId, (x) =>
      (x.replies ?? []).some((r) => r.from_task === t.task_id) ? x : {
        ...x,
        replies: [...(x.replies ?? []), { from_task: t.task_id, worker: t.worker, at, status: t.status, text }]
      }).pipe(Effect.mapError((e) => e.message))
    yield* appendJournal(target.worker, { kind: "reply", task_id: targetId, from_task: t.task_id, status: t.status, text })
  })

/** Hands the answer to a live warm session, as a message of its own; an ended session is a failed delivery. */
const toTalk = (t: TaskRecord, runId: string, text: string, at: string) =>
  Effect.gen(function*() {
    const run = yield* findRun(runId)
    if (!run || run.kind !== "session") return yield* Effect.fail(`there is no session ${runId}`)
    // A session on another node of a fleet: its owner is that machine's process; its record says whether it ended.
    const elsewhere = run.node !== undefined && run.node !== (yield* Paths).fleet?.node
    const live = run.finished_at === null && run.owner !== undefined && (elsewhere || (yield* ownerAlive(run.owner)))
    if (!live) return yield* Effect.fail(`the session ${runId} has ended`)
    const file = layout(yield* Paths).inboxFile(runId)
    yield* (yield* FileSystem.FileSystem).makeDirectory((yield* Path.Path).dirname(file), { recursive: true, mode: 0o700 }).pipe(Effect.mapError((e) => e.message))
    const line: InboxLine = { id: `reply-${t.task_id}`, from_task: t.task_id, worker: t.worker, status: t.status, text, at }
    yield* (yield* Files).append(file, `${JSON.stringify(line)}\n`, 0o600).pipe(Effect.mapError((e) => e.message))
  })

/** Posts the answer in a chat thread org.toml maps (the daemon posts with the connection's token). */
const toChat = (target: Extract<ReplyTarget, { _tag: "chat" }>, text: string) =>
  postChat({ provider: target.provider, channel: target.channel, ...(target.thread ? { thread: target.thread } : {}) }, text).pipe(
    Effect.mapError((e) => e.message),
    Effect.asVoid
  )

/**
 * Delivers a task's answer to its reply_to, once: the delivery (time, target, ok or the error) is
 * written on the task, and a task with a delivery is never delivered again. A delivery cut by a
 * crash before it was recorded is made again, and each target takes a task's answer once (a
 * task's replies by the delivering task, a session's inbox by the delivery's id).
 */
export const deliverReply = Effect.fn("supervisor.deliverReply")(function*(t: TaskRecord) {
  if (!awaitsDelivery(t)) return
  const runId = t.run_ids.at(-1)
  // In a fleet only the node whose attempt ended it delivers, and only while the fleet holds it as that node's.
  const delivered = runId === undefined ? deliverOnce(t) : (yield* RunFence).guard({ runId, taskId: t.task_id }, deliverOnce(t))
  yield* delivered.pipe(Effect.catchTag("Fenced", (e) => Effect.logWarning(`task ${t.task_id}: its answer is not this node's to deliver: ${e.message}`)))
})

const deliverOnce = (t: TaskRecord) =>
  Effect.gen(function*() {
  const replyTo = t.reply_to ?? "none"
  const target = parseReplyTo(replyTo)
  const at = new Date(yield* Clock.currentTimeMillis).toISOString()
  const text = replyText(t)
  const send: Effect.Effect<void, string, TaskStore | OrgConfig | Vault | Files | HostFiles | RunIndex | TaintLog> =
    target._tag === "task" ? toTask(t, target.taskId, text, at)
    : target._tag === "talk" ? toTalk(t, target.runId, text, at)
    : target._tag === "chat" ? toChat(target, text)
    : target._tag === "invalid" ? Effect.fail(target.why)
    : Effect.void
  const done = yield* Effect.either(send)
  const delivery = done._tag === "Right" ? { target: replyTo, at, ok: true } : { target: replyTo, at, ok: false, error: done.left }
  yield* (yield* TaskStore).update(t.task_id, (x) => (x.delivery ? x : { ...x, delivery }))
  yield* (delivery.ok ? Effect.logInfo : Effect.logWarning)(
    `task ${t.task_id}: its answer ${delivery.ok ? "was delivered to" : "could not be delivered to"} ${replyTo}${done._tag === "Left" ? ` (${done.left})` : ""}`
  )
  })

/** Every ended task whose answer is still to be delivered (after a restart too): each delivered once. */
export const deliverPending = Effect.gen(function*() {
  // In a fleet each node delivers what its own runs ended: two nodes never both post one answer.
  const member = yield* Effect.serviceOption(FleetMember)
  const ours = (t: TaskRecord) => Option.isNone(member) || t.node === undefined || t.node === member.value.node
  for (const t of (yield* (yield* TaskStore).list).filter((x) => awaitsDelivery(x) && ours(x))) {
    yield* deliverReply(t).pipe(Effect.catchAllCause((c) => Effect.logError(`task ${t.task_id}: its answer could not be delivered`, c)))
  }
})
