import type { WebClient } from "@slack/web-api"
import { Effect, Schema } from "effect"
import { ChatPostError } from "./ChatPostError.js"
import { MARK_EVENT, type PostMark, SEARCH_SLACK_MS } from "./postMark.js"

export const SLACK_API = "https://slack.com/api/"

/**
 * Slack's Web API client for one bot token, aimed at `api_url` (Slack itself unless overridden).
 * Loaded on first use: a roster command that talks to no chat service never pays for the SDK.
 */
export const slackWeb = (token: string, apiUrl: string | undefined) =>
  Effect.promise(() => import("@slack/web-api")).pipe(Effect.map((sdk) =>
    new sdk.WebClient(token, {
      slackApiUrl: apiUrl ?? SLACK_API,
      logLevel: sdk.LogLevel.ERROR,
      timeout: 15_000,
      retryConfig: { retries: 2, factor: 2, minTimeout: 500, maxTimeout: 4000 },
      // A method name must never carry a post somewhere other than api_url.
      allowAbsoluteUrls: false
    })
  ))

/** Slack reads `&`, `<` and `>` as its own markup (`<!channel>`, `<@U…>`): escaped, a worker's text pings no one. */
export const slackEscape = (text: string) => text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;")

const failure = (where: string) => (cause: unknown) =>
  new ChatPostError({ where, detail: cause instanceof Error ? cause.message : String(cause) })

const MarkedMessages = Schema.Struct({
  ok: Schema.Boolean,
  error: Schema.optional(Schema.String),
  messages: Schema.optional(Schema.Array(Schema.Struct({
    ts: Schema.String,
    metadata: Schema.optional(Schema.Struct({
      event_type: Schema.optional(Schema.String),
      event_payload: Schema.optional(Schema.Struct({ mark: Schema.optional(Schema.String), part: Schema.optional(Schema.Number) }))
    }))
  })))
})

/**
 * The parts of a delivery already in the place (the thread, else the channel since shortly
 * before it began), by index, from their metadata. A search that fails is a failure: posting
 * again blind could post the answer twice.
 */
const slackMarked = (client: WebClient, channel: string, thread: string | undefined, mark: PostMark) =>
  Effect.tryPromise({
    try: () =>
      thread
        ? client.conversations.replies({ channel, ts: thread, include_all_metadata: true, limit: 200 })
        : client.conversations.history({
          channel,
          oldest: ((Date.parse(mark.since) - SEARCH_SLACK_MS) / 1000).toFixed(6),
          include_all_metadata: true,
          limit: 200
        }),
    catch: failure(`slack channel ${channel} (looking for a delivery cut short)`)
  }).pipe(
    Effect.flatMap(Schema.decodeUnknown(MarkedMessages)),
    Effect.mapError((e) => (e instanceof ChatPostError ? e : new ChatPostError({ where: `slack channel ${channel}`, detail: `an answer roster cannot read: ${e.message}` }))),
    Effect.map((r) => {
      const found = new Map<number, string>()
      for (const m of r.messages ?? []) {
        const payload = m.metadata?.event_type === MARK_EVENT ? m.metadata.event_payload : undefined
        if (payload?.mark === mark.id && payload.part !== undefined) found.set(payload.part, m.ts)
      }
      return found
    })
  )

/**
 * chat.postMessage of each part in order, in the thread when there is one; the message
 * timestamps. A delivery's parts carry its mark as message metadata, and one cut by a crash
 * posts only the parts the place does not already hold.
 */
export const slackPost = (client: WebClient, channel: string, thread: string | undefined, parts: ReadonlyArray<string>, mark?: PostMark) =>
  Effect.gen(function*() {
    const found = mark?.resume ? yield* slackMarked(client, channel, thread, mark) : new Map<number, string>()
    return yield* Effect.forEach(parts, (text, part) => {
      const already = found.get(part)
      return already !== undefined ? Effect.succeed(already) : Effect.tryPromise({
        try: () =>
          client.chat.postMessage({
            channel,
            text: slackEscape(text),
            ...(thread ? { thread_ts: thread } : {}),
            ...(mark ? { metadata: { event_type: MARK_EVENT, event_payload: { mark: mark.id, part } } } : {}),
            unfurl_links: false,
            unfurl_media: false
          }),
        catch: failure(`slack channel ${channel}`)
      }).pipe(Effect.map((r) => r.ts ?? ""))
    })
  })

/** auth.test: who the bot token is (its user id, to know a mention of it), or why it is refused. */
export const slackWho = (client: WebClient) =>
  Effect.tryPromise({ try: () => client.auth.test(), catch: failure("slack auth.test") }).pipe(
    Effect.flatMap((r) =>
      r.ok && typeof r.user_id === "string"
        ? Effect.succeed({ userId: r.user_id, team: r.team ?? "", user: r.user ?? "" })
        : Effect.fail(new ChatPostError({ where: "slack auth.test", detail: r.error ?? "not ok" })))
  )
