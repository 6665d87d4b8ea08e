import { Effect, FiberSet, Option, Schema, type Scope } from "effect"
import type { ChatRule } from "../config/schema.js"
import { discordRest, discordWhere, discordWho } from "./discordRest.js"
import type { DiscordTokens } from "../vault/chatTokens.js"
import type { ChatEvent } from "./admit.js"
import { keepConnected, type ListenerSink } from "./sink.js"
import { discordPress, interactionChannel } from "./cardPress.js"

const decodeChannelOf = Schema.decodeUnknownOption(Schema.Struct({ channel_id: Schema.String }))

// GUILDS | GUILD_MESSAGES | MESSAGE_CONTENT: the channel messages of the servers the bot is in, with their words.
const INTENTS = (1 << 0) | (1 << 9) | (1 << 15)

/** The parts of a MESSAGE_CREATE roster reads. */
const DiscordMessage = Schema.Struct({
  id: Schema.String,
  channel_id: Schema.String,
  content: Schema.optional(Schema.String),
  author: Schema.Struct({ id: Schema.String, bot: Schema.optional(Schema.Boolean) }),
  webhook_id: Schema.optional(Schema.String),
  mentions: Schema.optional(Schema.Array(Schema.Struct({ id: Schema.String }))),
  type: Schema.optional(Schema.Number),
  attachments: Schema.optional(Schema.Array(Schema.Struct({
    id: Schema.String,
    filename: Schema.String,
    content_type: Schema.optional(Schema.String),
    size: Schema.Number,
    url: Schema.String
  })))
})

/** A MESSAGE_CREATE as a chat event, its channel resolved to the mapped one (a thread's parent) by `where`. */
export const discordEvent = (raw: unknown, botId: string, where: { readonly channel: string; readonly thread: string | undefined }): ChatEvent | undefined => {
  const decoded = Schema.decodeUnknownOption(DiscordMessage)(raw)
  if (decoded._tag === "None") return undefined
  const m = decoded.value
  // 0: a default message, 19: a reply; joins, pins and the like are not words.
  if (m.type !== undefined && m.type !== 0 && m.type !== 19) return undefined
  const text = m.content ?? ""
  return {
    provider: "discord",
    channel: where.channel,
    thread: where.thread,
    id: m.id,
    user: m.author.id,
    text,
    mentionsBot: (m.mentions ?? []).some((u) => u.id === botId) || text.includes(`<@${botId}>`) || text.includes(`<@!${botId}>`),
    fromBot: m.author.bot === true || m.webhook_id !== undefined,
    files: (m.attachments ?? []).map((a) => ({ id: a.id, name: a.filename, type: a.content_type ?? "application/octet-stream", size: a.size, url: a.url }))
  }
}

/**
 * One Discord `[[chat]]` over Discord's gateway (an outbound websocket; no inbound port), with
 * the discord.js project's own gateway (@discordjs/ws) and REST (@discordjs/rest) clients: who
 * the bot is, then each MESSAGE_CREATE handed to the sink, a thread's messages under the channel
 * it is in. The client resumes or re-identifies a dropped socket; a start that fails is tried
 * again with backoff, the status saying why. Runs until its scope closes, which disconnects it.
 */
export const discordListener = (chat: ChatRule, readTokens: Effect.Effect<DiscordTokens, string>, sink: ListenerSink): Effect.Effect<never, never, Scope.Scope> =>
  Effect.gen(function*() {
    // The SDK's callbacks run their work as fibers of the listener's scope: closing it interrupts them.
    const run = yield* FiberSet.makeRuntime<never>()
    // A thread's parent, looked up once (the gateway names only the thread a message is in).
    const parents = new Map<string, { readonly channel: string; readonly thread: string | undefined }>()
    const connect = Effect.gen(function*() {
      yield* sink.state("connecting", null)
      const tokens = yield* readTokens.pipe(Effect.mapError((detail) => new Error(detail)))
      const rest = yield* discordRest(tokens.bot_token, chat.api_url)
      const { WebSocketManager, WebSocketShardEvents } = yield* Effect.promise(() => import("@discordjs/ws"))
      const who = yield* discordWho(rest)
      const mapped = new Set(chat.channel.map((c) => c.id))
      const whereOf = (channelId: string) =>
        mapped.has(channelId)
          ? Effect.succeed({ channel: channelId, thread: undefined })
          : parents.has(channelId)
          ? Effect.succeed(parents.get(channelId) ?? { channel: channelId, thread: undefined })
          : discordWhere(rest, channelId).pipe(
            Effect.tap((w) => Effect.sync(() => parents.set(channelId, w))),
            // Not known to be a thread is taken for its channel this once: only a found answer is kept, so the next message asks again.
            Effect.orElseSucceed(() => ({ channel: channelId, thread: undefined }))
          )
      const manager = yield* Effect.acquireRelease(
        Effect.sync(() => new WebSocketManager({ token: tokens.bot_token, intents: INTENTS, rest })),
        // Closing: a connection that does not close within 5 s goes with the process.
        (m) => Effect.promise(async () => m.destroy()).pipe(Effect.timeout("5 seconds"), Effect.ignore)
      )
      manager.on(WebSocketShardEvents.Dispatch, (payload) => {
        if (payload.t === "INTERACTION_CREATE") {
          // A press of a held request's button, its channel mapped as a message's is.
          const at = interactionChannel(payload.d)
          if (at !== undefined && sink.press) {
            const press = sink.press
            run(whereOf(at).pipe(Effect.flatMap((where) => {
              const p = discordPress(payload.d, where)
              return p ? press(p) : Effect.void
            })))
          }
          return
        }
        if (payload.t !== "MESSAGE_CREATE") return
        const channelId = Option.getOrUndefined(decodeChannelOf(payload.d))?.channel_id
        if (channelId === undefined) return
        run(whereOf(channelId).pipe(Effect.flatMap((where) => {
          const e = discordEvent(payload.d, who.id, where)
          return e ? sink.event(e, who.id) : Effect.void
        })))
      })
      manager.on(WebSocketShardEvents.Ready, () => void run(sink.state("connected", null)))
      manager.on(WebSocketShardEvents.Resumed, () => void run(sink.state("connected", null)))
      manager.on(WebSocketShardEvents.Closed, (code) => void run(sink.state("reconnecting", `the gateway closed the socket (${code}); reconnecting`)))
      manager.on(WebSocketShardEvents.Error, (e) => void run(sink.state("reconnecting", e.message)))
      yield* Effect.tryPromise({
        try: () => manager.connect(),
        catch: (e) => new Error(`the gateway did not start: ${e instanceof Error ? e.message : String(e)} (check the bot token: roster connection add ${chat.connection})`)
      })
      yield* sink.state("connected", null)
      return yield* Effect.never
    }).pipe(Effect.scoped)
    return yield* keepConnected(connect, sink)
  })
