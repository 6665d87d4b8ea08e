import type { Logger } from "@slack/logger"
import { Effect, FiberSet, Schema, type Scope } from "effect"
import type { ChatRule } from "../config/schema.js"
import { slackWeb, slackWho } from "./slackWeb.js"
import type { SlackTokens } from "../vault/chatTokens.js"
import type { ChatEvent } from "./admit.js"
import { keepConnected, type ListenerSink } from "./sink.js"
import { slackPress } from "./cardPress.js"

/** The parts of a Slack message event roster reads; anything else in it is ignored. */
const SlackMessage = Schema.Struct({
  type: Schema.String,
  subtype: Schema.optional(Schema.String),
  channel: Schema.String,
  user: Schema.optional(Schema.String),
  bot_id: Schema.optional(Schema.String),
  text: Schema.optional(Schema.String),
  ts: Schema.String,
  thread_ts: Schema.optional(Schema.String),
  files: Schema.optional(Schema.Array(Schema.Struct({
    id: Schema.String,
    name: Schema.optional(Schema.String),
    mimetype: Schema.optional(Schema.String),
    size: Schema.optional(Schema.Number),
    url_private_download: Schema.optional(Schema.String),
    url_private: Schema.optional(Schema.String)
  })))
})

// Edits, joins, deletions and the like are not new words for the worker.
const READ_SUBTYPES = new Set([undefined, "thread_broadcast", "file_share"])

/** The SDK's logger, quiet: its errors reach the listener's status and the daemon's log, nothing else is printed. */
const sdkLogger = (onError: (text: string) => void): Logger => ({
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: (...msg: Array<unknown>) => onError(msg.map(String).join(" ")),
  setLevel: () => undefined,
  // LogLevel.ERROR, without loading the SDK to name it.
  getLevel: () => "error" as Logger extends { getLevel(): infer L } ? L : never,
  setName: () => undefined
})

export const slackEvent = (raw: unknown, botId: string): ChatEvent | undefined => {
  const decoded = Schema.decodeUnknownOption(SlackMessage)(raw)
  if (decoded._tag === "None" || !READ_SUBTYPES.has(decoded.value.subtype)) return undefined
  const m = decoded.value
  return {
    provider: "slack",
    channel: m.channel,
    thread: m.thread_ts,
    id: m.ts,
    user: m.user ?? "",
    text: m.text ?? "",
    mentionsBot: botId !== "" && (m.text ?? "").includes(`<@${botId}`),
    fromBot: m.bot_id !== undefined || m.subtype === "bot_message",
    // A file Slack lists without a URL (a deleted one, an external one) is not one roster can fetch.
    files: (m.files ?? []).flatMap((f) => {
      const url = f.url_private_download ?? f.url_private
      return url === undefined ? [] : [{ id: f.id, name: f.name ?? f.id, type: f.mimetype ?? "application/octet-stream", size: f.size ?? 0, url }]
    })
  }
}

/**
 * One Slack `[[chat]]` over Socket Mode (an outbound websocket; no inbound port): who the bot is
 * (auth.test), then events acknowledged at once and handed to the sink, each message once (a
 * mention arrives as `message` and `app_mention`; a retry carries one already seen). The SDK
 * reconnects a dropped socket; a start that fails is tried again with backoff, the status saying
 * why (a connection not added yet among them). Runs until its scope closes, which disconnects it.
 */
export const slackListener = (chat: ChatRule, readTokens: Effect.Effect<SlackTokens, string>, sink: ListenerSink): Effect.Effect<never, never, Scope.Scope> =>
  Effect.gen(function*() {
    // The SDK's callbacks run their work as fibers of the listener's scope: closing it interrupts them.
    const run = yield* FiberSet.makeRuntime<never>()
    const seen = new Set<string>()
    const once = (e: ChatEvent) => {
      const key = `${e.channel}/${e.id}`
      if (seen.has(key)) return false
      seen.add(key)
      if (seen.size > 2000) seen.delete(seen.values().next().value ?? key)
      return true
    }
    const connect = Effect.gen(function*() {
      yield* sink.state("connecting", null)
      // Read on every attempt: a connection added after the daemon started is picked up by the next one.
      const tokens = yield* readTokens.pipe(Effect.mapError((detail) => new Error(detail)))
      const who = yield* slackWho(yield* slackWeb(tokens.bot_token, chat.api_url))
      const sdk = yield* Effect.promise(() => import("@slack/socket-mode"))
      const client = yield* Effect.acquireRelease(
        Effect.sync(() =>
          new sdk.SocketModeClient({
            appToken: tokens.app_token,
            logger: sdkLogger((text) => void run(sink.state("reconnecting", text))),
            clientOptions: { ...(chat.api_url ? { slackApiUrl: chat.api_url } : {}), retryConfig: { retries: 3, factor: 2 } }
          })
        ),
        // Closing: a connection that does not close within 5 s goes with the process.
        (c) => Effect.promise(() => c.disconnect()).pipe(Effect.timeout("5 seconds"), Effect.ignore)
      )
      const onEvent = async (args: { readonly event?: unknown; readonly ack?: () => Promise<void> }) => {
        await args.ack?.().catch(() => undefined)
        const e = slackEvent(args.event, who.userId)
        if (e && once(e)) run(sink.event(e, who.userId))
      }
      // A press of a held request's button: acknowledged at once (Slack shows an error after 3 s), then decided.
      client.on("interactive", async (args: { readonly body?: unknown; readonly ack?: () => Promise<void> }) => {
        await args.ack?.().catch(() => undefined)
        const press = slackPress(args.body)
        if (press && sink.press) run(sink.press(press))
      })
      client.on("message", onEvent)
      client.on("app_mention", onEvent)
      client.on("connected", () => void run(sink.state("connected", null)))
      client.on("reconnecting", () => void run(sink.state("reconnecting", "the socket dropped; reconnecting")))
      yield* Effect.tryPromise({
        try: () => client.start(),
        catch: (e) => new Error(`Socket Mode did not start: ${e instanceof Error ? e.message : String(e)} (check the app-level token: roster connection add ${chat.connection})`)
      })
      yield* sink.state("connected", null)
      return yield* Effect.never
    }).pipe(Effect.scoped)
    return yield* keepConnected(connect, sink)
  })
