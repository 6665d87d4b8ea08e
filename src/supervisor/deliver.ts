import { FileSystem, Path } from "@effect/platform"
import { Clock, Effect, Option } from "effect"
import * as crypto from "node:crypto"
import { type HostFiles, Paths, layout } from "../config/Paths.js"
import type { InboxLine } from "../contract/inbox.js"
import { chatChannelName, parseReplyTo, type ReplyTarget } from "../contract/origin.js"
import type { OrgConfig } from "../config/OrgConfig.js"
import type { Vault } from "../vault/Vault.js"
import { Files } from "../fs/Files.js"
import { FleetMember } from "../fleet/FleetMember.js"
import { postChat } from "../chat/postChat.js"
import type { PostMark } from "../chat/postMark.js"
import { appendJournal } from "../journal/journal.js"
import { appendChannel } from "../journal/channel.js"
import { taintFrom } from "../box/inheritTaint.js"
import { liveSession } from "../reply/liveSession.js"
import { RunLog } from "../run/RunLog.js"
import { readRunContext } from "../run/runContext.js"
import { checkReplyTo, PERSON_ASKS, type ReplyAsker } from "../reply/replyTo.js"
import { RunFence } from "../run/RunFence.js"
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

/** A task whose answer has somewhere to go and has not been delivered (nor begun to be). */
export const awaitsDelivery = (t: TaskRecord) =>
  isFinal(t.status) && !t.unreadable && t.reply_to !== undefined && t.reply_to !== null && t.reply_to !== "none" && t.delivery === undefined

/** A delivery begun and never recorded as done: its daemon died with the post in flight. */
const cutShort = (t: TaskRecord) => t.delivery?.pending === true && !t.unreadable

/** The taint the answer of `t` carries (its last run's, when that run is tainted), as a taint of the run it reaches through `where`. */
const answerTaint = (t: TaskRecord, where: string) => {
  const runId = t.run_ids.at(-1)
  return runId === undefined ? Effect.succeed(null) : taintFrom({ worker: t.worker, runId, via: "words", where })
}

/**
 * Appends the answer to another task's record (once per delivering task) and that worker's journal.
 * The journal is every later run's to read (/pihome/self/journal): a tainted run's answer is kept on
 * the record (host-side) and withheld from the journal, which says where it is.
 */
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
    const tainted = yield* answerTaint(t, `a reply to task ${targetId}`)
    const journalText = tainted === null ? text :
      `[roster] this answer is withheld here: it comes from run ${tainted.inherited_from}, which is tainted — a person reads it with roster task show ${t.task_id}, and passes such answers on with roster runs untaint ${tainted.inherited_from}`
    yield* appendJournal(target.worker, { kind: "reply", task_id: targetId, from_task: t.task_id, status: t.status, text: journalText })
  })

/**
 * Hands the answer to a live warm session, as a message of its own (checked live just before, by
 * checkReplyTo). A tainted run's answer taints the session first, naming it: its words are then the
 * session's input.
 */
const toTalk = (t: TaskRecord, runId: string, text: string, at: string) =>
  Effect.gen(function*() {
    const session = yield* liveSession(runId)
    const tainted = yield* answerTaint(t, `a reply delivered to session ${runId}`)
    if (tainted !== null && session.live) yield* (yield* RunLog).append(session.worker, runId, { kind: "taint", taint: tainted }).pipe(Effect.mapError((e) => e.message))
    const file = layout(yield* Paths).inboxFile(runId)
    yield* (yield* FileSystem.FileSystem).makeDirectory((yield* Path.Path).dirname(file), { recursive: true, mode: 0o700 }).pipe(Effect.mapError((e) => e.message))
    const line: InboxLine = { id: `reply-${t.task_id}`, from_task: t.task_id, worker: t.worker, status: t.status, text, at }
    yield* (yield* Files).append(file, `${JSON.stringify(line)}\n`, 0o600).pipe(Effect.mapError((e) => e.message))
  })

/**
 * Posts the answer in a chat thread org.toml maps (the daemon posts with the connection's token),
 * carrying the delivery's mark, and keeps it in the channel's history as its run's words: the
 * channel's next session reads both (and takes that run's taint with them).
 */
const toChat = (t: TaskRecord, target: Extract<ReplyTarget, { _tag: "chat" }>, text: string, mark: PostMark) =>
  postChat({ provider: target.provider, channel: target.channel, ...(target.thread ? { thread: target.thread } : {}) }, text, mark).pipe(
    Effect.mapError((e) => e.message),
    Effect.zipRight(appendChannel(chatChannelName(target), { author: t.worker, text, role: "worker", ...(t.run_ids.at(-1) ? { run_id: t.run_ids.at(-1) } : {}) }))
  )

/**
 * Delivers a task's answer to its reply_to, once. The delivery is claimed on the task's record
 * (pending, with its mark) before anything leaves, so a second pass — this daemon's next, or
 * another node's — finds it begun and leaves it; its outcome (ok, or the error) replaces the
 * claim. `resume` is for a daemon's start: a delivery its dead predecessor left pending is made
 * again, and the place is searched for its mark first (a chat post that landed is not posted
 * twice; a task's replies and a session's inbox take a task's answer once by its id).
 */
export const deliverReply = Effect.fn("supervisor.deliverReply")(function*(t: TaskRecord, resume = false) {
  if (!(awaitsDelivery(t) || (resume && cutShort(t)))) return
  const runId = t.run_ids.at(-1)
  // In a fleet only the node whose attempt ended it delivers, and only while the fleet holds it as that node's.
  const delivered = runId === undefined ? deliverOnce(t, resume) : (yield* RunFence).guard({ runId, taskId: t.task_id }, deliverOnce(t, resume))
  yield* delivered.pipe(Effect.catchTag("Fenced", (e) => Effect.logWarning(`task ${t.task_id}: its answer is not this node's to deliver: ${e.message}`)))
})

/** The claim of a delivery: written only where none is (or, resuming, where a dead daemon's is pending). */
const claimDelivery = (t: TaskRecord, replyTo: string, resume: boolean) =>
  Effect.gen(function*() {
    const claim = crypto.randomBytes(6).toString("hex")
    const at = new Date(yield* Clock.currentTimeMillis).toISOString()
    const claimed = yield* (yield* TaskStore).update(t.task_id, (x) =>
      x.delivery === undefined
        ? { ...x, delivery: { target: replyTo, at, ok: false, pending: true as const, mark: `rd-${x.task_id.slice(2)}`, claim } }
        : resume && x.delivery.pending
        ? { ...x, delivery: { ...x.delivery, claim } }
        : x)
    const d = claimed.delivery
    return d?.pending && d.claim === claim ? Option.some({ mark: d.mark ?? `rd-${t.task_id.slice(2)}`, since: d.at, resumed: d.at !== at }) : Option.none()
  })

const deliverOnce = (t: TaskRecord, resume: boolean) =>
  Effect.gen(function*() {
    const replyTo = t.reply_to ?? "none"
    const claimed = yield* claimDelivery(t, replyTo, resume)
    if (Option.isNone(claimed)) return
    const { mark, resumed, since } = claimed.value
    const target = parseReplyTo(replyTo)
    const text = replyText(t)
    // The place is checked again as it is now: still there, and — for what a worker queued — still one of its run's own.
    const asker: ReplyAsker = t.origin.by === "self" && t.origin.run_id !== null
      ? { _tag: "run", runId: t.origin.run_id, context: yield* readRunContext(t.worker, t.origin.run_id) }
      : PERSON_ASKS
    const place: Effect.Effect<void, string, TaskStore | OrgConfig | Vault | Files | HostFiles | RunLog> =
      target._tag === "task" ? toTask(t, target.taskId, text, since)
      : target._tag === "talk" ? toTalk(t, target.runId, text, since)
      : target._tag === "chat" ? toChat(t, target, text, { id: mark, since, resume: resumed })
      : Effect.void
    const send = target._tag === "invalid" ? Effect.fail(target.why) : Effect.zipRight(checkReplyTo(replyTo, asker).pipe(Effect.mapError((e) => e.message)), place)
    const done = yield* Effect.either(send)
    const delivery = done._tag === "Right" ? { target: replyTo, at: since, ok: true } : { target: replyTo, at: since, ok: false, error: done.left }
    yield* (yield* TaskStore).update(t.task_id, (x) => (x.delivery?.pending ? { ...x, delivery } : x))
    yield* (delivery.ok ? Effect.logInfo : Effect.logWarning)(
      `task ${t.task_id}: its answer ${delivery.ok ? "was delivered to" : "could not be delivered to"} ${replyTo}${done._tag === "Left" ? ` (${done.left})` : ""}`
    )
  })

/**
 * Every ended task whose answer is still to be delivered, each delivered once. At a daemon's
 * start (`resume`) also every delivery its predecessor left under way.
 */
export const deliverPending = (resume = false) =>
  Effect.gen(function*() {
    // In a fleet each node delivers what its own runs ended: two nodes never both post one answer.
    const member = yield* Effect.serviceOption(FleetMember)
    const ours = (t: TaskRecord) => Option.isNone(member) || t.node === undefined || t.node === member.value.node
    const store = yield* TaskStore
    // A fleet's store finds them by an index; a daemon's start (resume) reads the queue once.
    const candidates = store.undelivered && !resume
      ? yield* store.undelivered.pipe(Effect.catchAll((e) => Effect.logWarning(`answers not delivered this pass: ${e.message}`).pipe(Effect.as([]))))
      : yield* store.list
    for (const t of candidates.filter((x) => (awaitsDelivery(x) || (resume && cutShort(x))) && ours(x))) {
      yield* deliverReply(t, resume).pipe(Effect.catchAllCause((c) => Effect.logError(`task ${t.task_id}: its answer could not be delivered`, c)))
    }
  })
