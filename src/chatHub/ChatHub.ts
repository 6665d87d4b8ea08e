import { Clock, Context, Effect, Layer, Option, Ref } from "effect"
import { OrgConfig } from "../config/OrgConfig.js"
import { layout, Paths } from "../config/Paths.js"
import { type ChatChannel, chatChannelOf, type ChatRule } from "../config/schema.js"
import type { ChatListenerStatus } from "../contract/chatStatus.js"
import { chatChannelKey, chatChannelName, type ChatPlace } from "../contract/origin.js"
import { Runner } from "../runner/Runner.js"
import { Supervisor } from "../supervisor/Supervisor.js"
import { ChatClients } from "../chat/ChatClients.js"
import type { CardPress } from "../chat/cardPress.js"
import { Gateway } from "../gateway/egress/Gateway.js"
import { ApprovalBoard, type BoardDecision } from "../contract/ApprovalBoard.js"
import { type CardPlace, cardPlaceText, decisionRefusal, type PendingApproval, pressRefusal } from "../contract/approval.js"
import { FleetMember } from "../fleet/FleetMember.js"
import { type TurnMarks, turnMarks } from "./turnMarks.js"
import { admit, type ChatEvent, takeTurn } from "../chat/admit.js"
import { type Desk, type DeskEnv, makeDesk } from "./desk.js"
import { type Backlog, fileBacklog, groupByThread, WAITING_PER_THREAD } from "./backlog.js"
import { cutNote, droppedNotice, endedNotice, failedNotice, limitedNotice, skippedNotice, startedNotice } from "./notices.js"
import { handleUnsent, say } from "./say.js"
import type { ListenerSink } from "../chat/sink.js"
import { discordListener } from "../chat/discordListener.js"
import { slackListener } from "../chat/slackListener.js"

/** The daemon's chat surfaces, as `server status` reads them. */
export interface ChatHubApi {
  readonly status: Effect.Effect<ReadonlyArray<ChatListenerStatus>>
}

/** One `[[chat]]`'s listener state and counters, and the desks of its channels. */
interface Surface {
  readonly chat: ChatRule
  readonly status: Ref.Ref<ChatListenerStatus>
  readonly desks: ReadonlyMap<string, { readonly channel: ChatChannel; readonly desk: Desk }>
}

/** The most characters of a place's past a session's first turn is given. */
const HISTORY_CHARS = 12_000

const wrongKind = (chat: ChatRule) => `the connection "${chat.connection}" does not hold ${chat.provider} tokens: roster connection add ${chat.connection}`

const now = Effect.map(Clock.currentTimeMillis, (t) => new Date(t).toISOString())

/**
 * A channel whose day's budget is spent starts no box: the message is answered with what was
 * spent and when it starts again (the gateway would refuse the session's first model call anyway).
 */
const budgetLeft = (chat: ChatRule, channel: ChatChannel, spentToday: ((key: string) => Effect.Effect<number>) | undefined) =>
  Effect.gen(function*() {
    if (channel.budget_usd_day === undefined || !spentToday) return
    const spent = yield* spentToday(chatChannelKey({ provider: chat.provider, channel: channel.id }))
    const over = channelSpent(chat.provider, channel.id, channel.budget_usd_day, spent)
    if (over) return yield* Effect.fail({ message: over })
  })

/** In words, when a channel's spending today has reached its budget_usd_day; undefined while some is left. */
export const channelSpent = (provider: string, id: string, budget: number, spent: number) =>
  spent < budget ? undefined : `${provider} channel ${id} has spent $${spent.toFixed(4)} (estimated) of its budget_usd_day of $${budget.toFixed(4)} today; ` +
    "it starts again at 00:00 UTC — to allow more, raise budget_usd_day of its [[chat.channel]] in org.toml"

/** The desk's way into the daemon for one channel: its session (the Runner's, holding a box slot), and its lines in the thread. */
export const deskEnv = (
  chat: ChatRule,
  channel: ChatChannel,
  supervisor: Supervisor["Type"],
  runner: Runner["Type"],
  marks: TurnMarks,
  clients: ChatClients["Type"],
  /** What the channel's runs spent this UTC day (its `budget_usd_day` is checked before a session starts a box). */
  spentToday?: (chatChannel: string) => Effect.Effect<number>,
  /** Where its waiting messages are kept (none: in memory only). */
  backlog?: Backlog
): DeskEnv => ({
  ...(backlog ? { backlog } : {}),
  // Each thread told, once, which of its messages will not reach the next session.
  onDropped: (dropped) =>
    Effect.forEach(groupByThread(dropped), ([place, ms]) => say(clients, place, droppedNotice(channel.worker, WAITING_PER_THREAD, ms)), { discard: true }),
  runSession: (inbox, first, onReady) =>
    budgetLeft(chat, channel, spentToday).pipe(Effect.zipRight(Effect.scoped(supervisor.holdSlot(channel.worker, `chat:${chat.provider}:${channel.id}`).pipe(
      Effect.zipRight(runner.session({
        worker: channel.worker,
        inbox,
        surface: "chat-session",
        channel: chatChannelName(first.place),
        origin: { _tag: "chat", ...first.place, author: first.author },
        chat: first.place,
        onReady,
        onTurnStart: marks.start,
        onTurnEnd: (_turn, end) => marks.end(end),
        onUnsent: (_turn, text, message) => handleUnsent(clients, chat, channel.worker, message?.place ?? first.place, text),
        onNote: (text) => Effect.logInfo(`chat ${chat.provider}:${channel.id}: ${text}`),
        // Said in its thread too, and marked unanswered: its sender is the one who can send it again.
        onSkipped: (message, why) =>
          say(clients, message.place ?? first.place, skippedNotice(channel.worker, why)).pipe(
            Effect.zipRight(marks.end({ delivered: false, failed: true, message }))
          ),
        // A message's files, fetched by the daemon with the connection's token (the box never holds it).
        files: {
          fetch: (file, dest, max) => clients.fetchFile(chat, file, dest, max),
          maxBytes: Math.floor(chat.file_max * 1024 * 1024)
        },
        limits: { idleSecs: channel.idle_min * 60, ceilingMin: channel.ceiling_min }
      }))
    )))).pipe(Effect.mapError((e) => ({ message: e.message }))),
  onReady: (runId, first) => say(clients, first, startedNotice(channel.worker, runId)),
  past: (first) =>
    clients.past(first.place, first.messageId, { messages: channel.history_max, chars: HISTORY_CHARS, people: channel.allow_users }).pipe(
      Effect.map((lines) => lines.map((l) => ({ author: l.author, text: l.text, ...(l.own ? { speaker: "you" as const } : {}) }))),
      // Without the service's past the session starts from the roster channel's own history.
      Effect.catchAll((e) => Effect.logWarning(`chat ${chat.provider}:${channel.id}: the thread's past could not be read: ${e.message}`).pipe(Effect.as(undefined)))
    ),
  // What the session ran under, from its own snapshot: the notice never reads org.toml a second time.
  onEnd: (o, last) => say(clients, last, endedNotice(channel.worker, o.runId, o.reason, channel.idle_min, o.ceilingMin, o.stopped)),
  onFail: (message, last) => say(clients, last, failedNotice(channel.worker, message))
})

/**
 * A held request's button pressed in a thread. It decides the request only when the button is on
 * that request's own card — pressed on the connection, in the channel and thread the card was
 * posted in — and the presser is one of that channel's approvers (`approvers`, else
 * `allow_users`); the audit line names them (`slack:<user-id>`), the place and the card. Anyone
 * else, a button of another card, and a request no longer waiting are told so (only they see it)
 * and logged. The card itself is edited by the hold as it ends, whoever decided.
 */
const pressed = (s: Surface, p: CardPress, approvals: Gateway["Type"]["approvals"], clients: ChatClients["Type"]) =>
  Effect.gen(function*() {
    const channel = chatChannelOf(s.chat, p.channel)
    if (!channel) return
    const place: ChatPlace = { provider: p.provider, channel: channel.id, ...(p.thread ? { thread: p.thread } : {}) }
    const where = `chat ${s.chat.provider}:${channel.id}`
    const refuse = (why: string) =>
      Effect.logWarning(`${where}: ${p.user} pressed ${p.decision} on ${p.approvalId}: refused (${why})`).pipe(
        Effect.zipRight(clients.answerPress(place, p, `[roster] ${why}.`))
      )
    const held = yield* heldRequest(approvals, p.approvalId)
    if (Option.isNone(held)) return yield* refuse(`${p.approvalId} is no longer waiting: it was already decided, ran out of time, or its run ended`)
    const card = held.value.view.card
    const notThat = decisionRefusal(held.value.view, p.decision)
    if (notThat) return yield* refuse(notThat)
    const wrong = pressRefusal(card, { provider: p.provider, connection: s.chat.connection, channel: channel.id, thread: p.thread, message: p.message })
    if (wrong !== undefined || card === undefined) return yield* refuse(wrong ?? "its request has no card")
    // The approvers of the place the card is in (the press came from there, checked above).
    const approvers = channel.approvers ?? channel.allow_users
    if (!approvers.includes(p.user)) return yield* refuse("not yours to decide: only this channel's approvers can ([[chat.channel]] approvers in org.toml)")
    const by = `${p.provider}:${p.user}`
    const decided = { decision: p.decision, by, where: cardPlaceText(card) }
    // Held here, or (a fleet) by another node's gateway: decided on the fleet's board, that node told at once.
    const done = held.value.here ? yield* approvals.decide(p.approvalId, decided, card) : yield* onTheBoard(p.approvalId, decided, card)
    if (Option.isNone(done)) return yield* refuse(`${p.approvalId} is no longer waiting: it was already decided, ran out of time, or its run ended`)
    yield* clients.answerPress(place, p)
    yield* Effect.logInfo(
      `gateway: ${by} decided ${p.decision} on ${done.value.method} ${done.value.host}:${done.value.port} for run ${done.value.run_id} (${done.value.worker}), in ${decided.where}`
    )
  }).pipe(Effect.catchAll((e) => Effect.logWarning(`chat ${s.chat.provider}:${p.channel}: a press on ${p.approvalId} could not be answered: ${e.message}`)))

/** A request still held: by this node's gateway, else (a fleet) on the board by another's. */
const heldRequest = (approvals: Gateway["Type"]["approvals"], id: string) =>
  Effect.gen(function*() {
    const here = yield* approvals.find(id)
    if (Option.isSome(here)) return Option.some({ view: here.value, here: true })
    const board = yield* Effect.serviceOption(ApprovalBoard)
    if (Option.isNone(board)) return Option.none()
    const waiting = yield* board.value.waiting.pipe(
      Effect.catchAll((e) => Effect.logWarning(`chat: the fleet's board could not be read for ${id}: ${e.message}`).pipe(Effect.as([])))
    )
    return Option.map(Option.fromNullable(waiting.find((v) => v.id === id)), (view) => ({ view, here: false }))
  })

/** A request held on another node of a fleet, decided on its board if its card is still `card` (none when the board is silent). */
const onTheBoard = (id: string, decided: BoardDecision, card: CardPlace) =>
  Effect.gen(function*() {
    const board = yield* Effect.serviceOption(ApprovalBoard)
    if (Option.isNone(board)) return Option.none<PendingApproval>()
    const done = yield* board.value.decide(id, decided, card).pipe(
      Effect.catchAll((e) => Effect.logWarning(`chat: ${id} could not be decided on the fleet's board: ${e.message}`).pipe(Effect.as(Option.none<PendingApproval>())))
    )
    const member = yield* Effect.serviceOption(FleetMember)
    const node = Option.getOrUndefined(done)?.node
    if (node && Option.isSome(member)) yield* member.value.nudgeApprovals(node)
    return done
  })

/** One message through the gate: counted and dropped, refused for its rate, or a turn of the channel's desk. */
const hear = (s: Surface, clients: ChatClients["Type"], starts: Map<string, ReadonlyArray<number>>, e: ChatEvent, botId: string) =>
  Effect.gen(function*() {
    const a = admit(s.chat, e, botId)
    if (a._tag === "ignore") return
    if (a._tag === "stranger") {
      yield* Ref.update(s.status, (x) => ({ ...x, ignored: x.ignored + 1 }))
      return yield* Effect.logInfo(`chat ${s.chat.provider}:${e.channel}: a message from ${e.user} (not in allow_users) ignored`)
    }
    const key = a.channel.id.toLowerCase()
    const desk = s.desks.get(key)
    if (!desk) return
    // Slack threads on the message itself; Discord answers in the thread it is in, else as a reply to it.
    const place: ChatPlace = s.chat.provider === "slack"
      ? { provider: "slack", channel: a.channel.id, thread: e.thread ?? e.id }
      : { provider: "discord", channel: a.channel.id, ...(e.thread ? { thread: e.thread } : {}), message: e.id }
    const turn = takeTurn(starts.get(key) ?? [], yield* Clock.currentTimeMillis, s.chat.turns_per_min)
    starts.set(key, turn.starts)
    if (!turn.ok) {
      yield* Ref.update(s.status, (x) => ({ ...x, limited: x.limited + 1 }))
      return yield* say(clients, place, limitedNotice(a.channel.worker, s.chat.turns_per_min))
    }
    yield* Ref.update(s.status, (x) => ({ ...x, turns: x.turns + 1 }))
    yield* desk.desk.offer({
      text: a.cut ? `${a.text}${cutNote(s.chat.message_max)}` : a.text,
      author: e.user,
      provider: s.chat.provider,
      messageId: e.id,
      place,
      ...(a.files.length > 0 ? { files: a.files } : {})
    })
  })

const make = Effect.gen(function*() {
  const org = yield* (yield* OrgConfig).snapshot
  const supervisor = yield* Supervisor
  const runner = yield* Runner
  const gateway = yield* Gateway
  const approvals = gateway.approvals
  const clients = yield* ChatClients
  const paths = yield* Paths
  const surfaces: Array<Surface> = []
  for (const chat of org.chat) {
    const status = yield* Ref.make<ChatListenerStatus>({
      provider: chat.provider, connection: chat.connection, state: "connecting", detail: null, since: yield* now,
      channels: [], ignored: 0, limited: 0, turns: 0
    })
    const desks = new Map<string, { readonly channel: ChatChannel; readonly desk: Desk }>()
    for (const channel of chat.channel) {
      const spentToday = (key: string) =>
        Effect.flatMap(now, (iso) => gateway.ledger.spent(channel.worker, "", iso, key)).pipe(Effect.map((s) => s.channelDayUsd))
      const name = chatChannelName({ provider: chat.provider, channel: channel.id })
      const backlog = yield* fileBacklog(layout(paths).chatWaitingFile(name), `chat ${chat.provider}:${channel.id}`)
      const desk = yield* makeDesk(deskEnv(chat, channel, supervisor, runner, yield* turnMarks(chat, clients), clients, spentToday, backlog))
      desks.set(channel.id.toLowerCase(), { channel, desk })
    }
    const surface: Surface = { chat, status, desks }
    surfaces.push(surface)
    const starts = new Map<string, ReadonlyArray<number>>()
    const sink: ListenerSink = {
      event: (e, botId) =>
        hear(surface, clients, starts, e, botId).pipe(
          Effect.catchAllCause((c) => Effect.logError(`chat ${chat.provider}:${e.channel}: a message could not be handled`, c))
        ),
      press: (p) =>
        pressed(surface, p, approvals, clients).pipe(
          Effect.catchAllCause((c) => Effect.logError(`chat ${chat.provider}:${p.channel}: a button press could not be handled`, c))
        ),
      state: (state, detail) =>
        Effect.gen(function*() {
          const before = yield* Ref.get(status)
          if (before.state === state && before.detail === detail) return
          yield* Ref.set(status, { ...before, state, detail, since: yield* now })
          yield* (state === "failing" || state === "stopped" ? Effect.logWarning : Effect.logInfo)(
            `chat ${chat.provider} (${chat.connection}): ${state}${detail ? `: ${detail}` : ""}`
          )
        })
    }
    const tokens = clients.tokens(chat.provider, chat.connection)
    yield* Effect.forkScoped(
      chat.provider === "slack"
        ? slackListener(chat, tokens.pipe(Effect.flatMap((t) => (t.type === "slack" ? Effect.succeed(t) : Effect.fail(wrongKind(chat))))), sink)
        : discordListener(chat, tokens.pipe(Effect.flatMap((t) => (t.type === "discord" ? Effect.succeed(t) : Effect.fail(wrongKind(chat))))), sink)
    )
  }
  return {
    status: Effect.forEach(surfaces, (s) =>
      Effect.gen(function*() {
        const st = yield* Ref.get(s.status)
        const channels = yield* Effect.forEach([...s.desks.values()], ({ channel, desk }) =>
          Effect.map(desk.session, (session) => ({ id: channel.id, worker: channel.worker, session })))
        return { ...st, channels }
      }))
  } satisfies ChatHubApi
})

/** The daemon's `[[chat]]` listeners and their channels' sessions, for as long as its scope is open. */
export class ChatHub extends Context.Tag("roster/ChatHub")<ChatHub, ChatHubApi>() {
  static readonly layer = Layer.scoped(ChatHub, make)
}
