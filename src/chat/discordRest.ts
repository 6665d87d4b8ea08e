import type { REST } from "@discordjs/rest"
import { Effect, Schema } from "effect"
import type { ChatPlace } from "../contract/origin.js"
import { ChatPostError } from "./ChatPostError.js"
import { partNonce, type PostMark, SEARCH_SLACK_MS } from "./postMark.js"

export const DISCORD_API = "https://discord.com/api/"

/**
 * Discord's REST client (the discord.js project's) for one bot token, aimed at `api_url` (Discord
 * itself unless overridden). Loaded on first use, like the Slack SDK.
 */
export const discordRest = (token: string, apiUrl: string | undefined) =>
  Effect.promise(() => import("@discordjs/rest")).pipe(Effect.map((sdk) =>
    new sdk.REST({ api: (apiUrl ?? DISCORD_API).replace(/\/$/, ""), version: "10", retries: 2, timeout: 15_000 }).setToken(token)
  ))

const Created = Schema.Struct({ id: Schema.String })
const Me = Schema.Struct({ id: Schema.String, username: Schema.String })
/** A channel as roster reads it: a thread's type (10, 11, 12) and the channel it is in. */
const ChannelInfo = Schema.Struct({ id: Schema.String, type: Schema.Number, parent_id: Schema.optional(Schema.NullOr(Schema.String)) })
const THREAD_TYPES = new Set([10, 11, 12])

const call = <A, I>(what: string, schema: Schema.Schema<A, I>, request: () => Promise<unknown>) =>
  Effect.tryPromise({
    try: request,
    catch: (e) => new ChatPostError({ where: what, detail: e instanceof Error ? e.message : String(e) })
  }).pipe(
    Effect.flatMap((raw) => Schema.decodeUnknown(schema)(raw)),
    Effect.mapError((e) => (e instanceof ChatPostError ? e : new ChatPostError({ where: what, detail: `an answer roster cannot read: ${e.message}` })))
  )

const Posted = Schema.Array(Schema.Struct({ id: Schema.String, content: Schema.String, timestamp: Schema.String, author: Schema.Struct({ id: Schema.String }) }))

/**
 * The parts of a delivery already in the place: the bot's own messages there since shortly
 * before it began whose text is a part's (Discord keeps no nonce on a stored message). A search
 * that fails is a failure: posting again blind could post the answer twice.
 */
const discordMarked = (rest: REST, channel: string, parts: ReadonlyArray<string>, mark: PostMark) =>
  Effect.gen(function*() {
    const me = yield* discordWho(rest)
    const recent = yield* call(`discord channel ${channel} (looking for a delivery cut short)`, Posted, () =>
      rest.get(`/channels/${channel}/messages`, { query: new URLSearchParams({ limit: "100" }) }))
    const since = Date.parse(mark.since) - SEARCH_SLACK_MS
    const found = new Map<number, string>()
    for (const m of recent) {
      if (m.author.id !== me.id || Date.parse(m.timestamp) < since) continue
      const part = parts.findIndex((p, i) => p === m.content && !found.has(i))
      if (part >= 0) found.set(part, m.id)
    }
    return found
  })

/**
 * Each part posted in order: into the thread when the place is one, else into the channel as a
 * reply to the message answered. No mention in a worker's text pings anyone (allowed_mentions).
 * A delivery's parts carry a nonce Discord enforces (a repeat within minutes is the same message),
 * and one cut by a crash posts only the parts the place does not already hold.
 */
export const discordPost = (rest: REST, place: ChatPlace, parts: ReadonlyArray<string>, mark?: PostMark) =>
  Effect.gen(function*() {
    const channel = place.thread ?? place.channel
    const found = mark?.resume ? yield* discordMarked(rest, channel, parts, mark) : new Map<number, string>()
    return yield* Effect.forEach(parts, (content, i) => {
      const already = found.get(i)
      return already !== undefined ? Effect.succeed(already) : call(`discord channel ${channel}`, Created, () =>
        rest.post(`/channels/${channel}/messages`, {
          body: {
            content,
            allowed_mentions: { parse: [] },
            ...(mark ? { nonce: partNonce(mark, i), enforce_nonce: true } : {}),
            ...(i === 0 && place.message && !place.thread ? { message_reference: { message_id: place.message, fail_if_not_exists: false } } : {})
          }
        })).pipe(Effect.map((m) => m.id))
    })
  })

/** GET /users/@me: who the bot token is (its id, to know a mention of it), or why it is refused. */
export const discordWho = (rest: REST) => call("discord /users/@me", Me, () => rest.get("/users/@me"))

/** A message's channel as roster maps it: a thread's parent channel and the thread, or the channel itself. */
export const discordWhere = (rest: REST, channelId: string) =>
  call(`discord channel ${channelId}`, ChannelInfo, () => rest.get(`/channels/${channelId}`)).pipe(
    Effect.map((c) => (THREAD_TYPES.has(c.type) && c.parent_id ? { channel: c.parent_id, thread: c.id } : { channel: c.id, thread: undefined }))
  )
