import type { REST } from "@discordjs/rest"
import type { WebClient } from "@slack/web-api"
import { Effect, Schema } from "effect"
import type { OrgConfig } from "../config/OrgConfig.js"
import type { HostFiles } from "../config/Paths.js"
import type { ChatPlace } from "../contract/origin.js"
import type { Vault } from "../vault/Vault.js"
import { chatClient, placeText } from "./chatClient.js"
import { ChatPostError } from "./ChatPostError.js"
import { discordWho } from "./discordRest.js"
import { slackWho } from "./slackWeb.js"

/** One message of a place's past: who wrote it, and whether it was the bot (the worker's own words). */
export interface PastLine {
  /** The service's id of its author (what `allow_users` lists). */
  readonly authorId: string
  readonly author: string
  readonly text: string
  readonly own: boolean
}

/** How much of a place's past a session's first turn is given, and whose words. */
export interface PastBound {
  readonly messages: number
  readonly chars: number
  /**
   * The people whose words are kept (the channel's allow_users), beside the bot's own: a
   * stranger's message reaches no box as a turn, and not as history either.
   */
  readonly people: ReadonlyArray<string>
}

// Roster's own lines in a thread (a session started, ended, a notice) are not the conversation.
const ROSTER_LINE = /^\[roster\]/

const SlackMessages = Schema.Struct({
  messages: Schema.optionalWith(Schema.Array(Schema.Struct({
    ts: Schema.String,
    user: Schema.optional(Schema.String),
    bot_id: Schema.optional(Schema.String),
    text: Schema.optionalWith(Schema.String, { default: () => "" })
  })), { default: () => [] })
})
const DiscordMessages = Schema.Array(Schema.Struct({
  id: Schema.String,
  content: Schema.optionalWith(Schema.String, { default: () => "" }),
  author: Schema.Struct({ id: Schema.String, username: Schema.optional(Schema.String) })
}))

const read = <A, I>(where: string, schema: Schema.Schema<A, I>, request: () => Promise<unknown>) =>
  Effect.tryPromise({ try: request, catch: (e) => new ChatPostError({ where, detail: e instanceof Error ? e.message : String(e) }) }).pipe(
    Effect.flatMap((raw) => Schema.decodeUnknown(schema)(raw)),
    Effect.mapError((e) => (e instanceof ChatPostError ? e : new ChatPostError({ where, detail: `an answer roster cannot read: ${e.message}` })))
  )

// Slack lists a thread oldest first (its parent first) and a channel newest first; both end up oldest first.
const slackPast = (client: WebClient, channel: string, place: ChatPlace, before: string, bound: PastBound) =>
  Effect.gen(function*() {
    const me = yield* slackWho(client)
    const inThread = place.thread !== undefined && place.thread !== before
    const found = yield* read(`slack channel ${channel}`, SlackMessages, () =>
      inThread
        ? client.conversations.replies({ channel, ts: place.thread!, latest: before, inclusive: false, limit: 200 })
        : client.conversations.history({ channel, latest: before, inclusive: false, limit: bound.messages }))
    const ordered = inThread ? found.messages : [...found.messages].reverse()
    return ordered.filter((m) => m.ts !== before).map((m): PastLine => {
      const id = m.user ?? m.bot_id ?? ""
      return { authorId: id, author: id, text: m.text, own: m.user === me.userId }
    })
  })

// Discord lists a channel's (or a thread's) messages newest first.
const discordPast = (rest: REST, channel: string, before: string, bound: PastBound) =>
  Effect.gen(function*() {
    const me = yield* discordWho(rest)
    const found = yield* read(`discord channel ${channel}`, DiscordMessages, () =>
      rest.get(`/channels/${channel}/messages`, { query: new URLSearchParams({ before, limit: String(Math.min(100, bound.messages)) }) }))
    return [...found].reverse().map((m): PastLine => ({ authorId: m.author.id, author: m.author.username ?? m.author.id, text: m.content, own: m.author.id === me.id }))
  })

/** The newest lines that fit the bound, oldest first: the bot's own (not roster's notices) and its people's. */
export const boundPast = (lines: ReadonlyArray<PastLine>, bound: PastBound): ReadonlyArray<PastLine> => {
  const kept: Array<PastLine> = []
  let chars = 0
  for (const line of [...lines].reverse()) {
    if (line.own ? ROSTER_LINE.test(line.text) : !bound.people.includes(line.authorId)) continue
    if (kept.length >= bound.messages || chars + line.text.length > bound.chars) break
    kept.push(line)
    chars += line.text.length
  }
  return kept.reverse()
}

/**
 * The recent past of the place a chat message came from, from the service itself: the thread it
 * is in, else the channel, before the message — so a session started in the middle of a thread
 * sees the thread, and its own earlier words in it.
 */
export const placePast = Effect.fn("chat.past")(function*(place: ChatPlace, before: string, bound: PastBound): Effect.fn.Return<
  ReadonlyArray<PastLine>,
  ChatPostError,
  OrgConfig | Vault | HostFiles
> {
  if (bound.messages === 0) return []
  const c = yield* chatClient(place)
  const lines = c.provider === "slack"
    ? yield* slackPast(c.client, c.channel, place, before, bound)
    : yield* discordPast(c.rest, place.thread ?? c.channel, before, bound)
  yield* Effect.annotateCurrentSpan("where", placeText(place))
  return boundPast(lines, bound)
})
