import type { REST } from "@discordjs/rest"
import { Effect, Schema } from "effect"
import type { ChatPlace } from "../../../contract/origin.js"
import { ChatPostError } from "./ChatPostError.js"

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

/**
 * Each part posted in order: into the thread when the place is one, else into the channel as a
 * reply to the message answered. No mention in a worker's text pings anyone (allowed_mentions).
 */
export const discordPost = (rest: REST, place: ChatPlace, parts: ReadonlyArray<string>) =>
  Effect.forEach(parts, (content, i) =>
    call(`discord channel ${place.thread ?? place.channel}`, Created, () =>
      rest.post(`/channels/${place.thread ?? place.channel}/messages`, {
        body: {
          content,
          allowed_mentions: { parse: [] },
          ...(i === 0 && place.message && !place.thread ? { message_reference: { message_id: place.message, fail_if_not_exists: false } } : {})
        }
      })).pipe(Effect.map((m) => m.id)))

/** GET /users/@me: who the bot token is (its id, to know a mention of it), or why it is refused. */
export const discordWho = (rest: REST) => call("discord /users/@me", Me, () => rest.get("/users/@me"))

/** A message's channel as roster maps it: a thread's parent channel and the thread, or the channel itself. */
export const discordWhere = (rest: REST, channelId: string) =>
  call(`discord channel ${channelId}`, ChannelInfo, () => rest.get(`/channels/${channelId}`)).pipe(
    Effect.map((c) => (THREAD_TYPES.has(c.type) && c.parent_id ? { channel: c.parent_id, thread: c.id } : { channel: c.id, thread: undefined }))
  )
