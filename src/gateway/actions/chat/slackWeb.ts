import type { WebClient } from "@slack/web-api"
import { Effect } from "effect"
import { ChatPostError } from "./ChatPostError.js"

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

/** chat.postMessage of each part in order, in the thread when there is one; the message timestamps. */
export const slackPost = (client: WebClient, channel: string, thread: string | undefined, parts: ReadonlyArray<string>) =>
  Effect.forEach(parts, (text) =>
    Effect.tryPromise({
      try: () =>
        client.chat.postMessage({
          channel,
          text: slackEscape(text),
          ...(thread ? { thread_ts: thread } : {}),
          unfurl_links: false,
          unfurl_media: false
        }),
      catch: failure(`slack channel ${channel}`)
    }).pipe(Effect.map((r) => r.ts ?? "")))

/** auth.test: who the bot token is (its user id, to know a mention of it), or why it is refused. */
export const slackWho = (client: WebClient) =>
  Effect.tryPromise({ try: () => client.auth.test(), catch: failure("slack auth.test") }).pipe(
    Effect.flatMap((r) =>
      r.ok && typeof r.user_id === "string"
        ? Effect.succeed({ userId: r.user_id, team: r.team ?? "", user: r.user ?? "" })
        : Effect.fail(new ChatPostError({ where: "slack auth.test", detail: r.error ?? "not ok" })))
  )
