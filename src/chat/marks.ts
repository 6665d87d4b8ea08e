import type { REST } from "@discordjs/rest"
import type { WebClient } from "@slack/web-api"
import { Effect, Schema } from "effect"
import type { OrgConfig } from "../config/OrgConfig.js"
import type { HostFiles } from "../config/Paths.js"
import type { ChatPlace } from "../contract/origin.js"
import type { Vault } from "../vault/Vault.js"
import { chatClient, placeText } from "./chatClient.js"
import { ChatPostError } from "./ChatPostError.js"

/** What a message a session serves shows: heard when its turn starts; answered, or not, when the turn ends. */
export type TurnMark = "heard" | "answered" | "unanswered"

const SLACK_NAME: Record<TurnMark, string> = { heard: "eyes", answered: "white_check_mark", unanswered: "warning" }
const DISCORD_EMOJI: Record<TurnMark, string> = { heard: "👀", answered: "✅", unanswered: "⚠️" }

// A reaction already there (or already gone) is the state wanted, not a failure.
const SlackSettled = Schema.Struct({ data: Schema.Struct({ error: Schema.Literal("already_reacted", "no_reaction") }) })
const isSettled = Schema.is(SlackSettled)

const slackReaction = (client: WebClient, op: "add" | "remove", channel: string, ts: string, name: string) =>
  Effect.tryPromise({
    try: () => (op === "add" ? client.reactions.add({ channel, timestamp: ts, name }) : client.reactions.remove({ channel, timestamp: ts, name })),
    catch: (e) => e
  }).pipe(
    Effect.asVoid,
    Effect.catchAll((e) =>
      isSettled(e) ? Effect.void : Effect.fail(new ChatPostError({ where: `slack channel ${channel}`, detail: `reactions.${op} ${name}: ${e instanceof Error ? e.message : String(e)}` })))
  )

const discordCall = (what: string, request: () => Promise<unknown>) =>
  Effect.tryPromise({ try: request, catch: (e) => new ChatPostError({ where: what, detail: e instanceof Error ? e.message : String(e) }) }).pipe(Effect.asVoid)

const discordReaction = (rest: REST, op: "put" | "delete", channel: string, message: string, emoji: string) =>
  discordCall(`discord channel ${channel}`, () => rest[op](`/channels/${channel}/messages/${message}/reactions/${encodeURIComponent(emoji)}/@me`))

/**
 * Puts `mark` on a message a session serves, taking `replaces` off first: a reaction on Slack,
 * Discord's emoji on Discord. The daemon reacts with the connection's token.
 */
export const markMessage = Effect.fn("chat.mark")(function*(place: ChatPlace, messageId: string, mark: TurnMark, replaces?: TurnMark): Effect.fn.Return<
  void,
  ChatPostError,
  OrgConfig | Vault | HostFiles
> {
  const c = yield* chatClient(place)
  if (c.provider === "slack") {
    if (replaces) yield* slackReaction(c.client, "remove", c.channel, messageId, SLACK_NAME[replaces])
    return yield* slackReaction(c.client, "add", c.channel, messageId, SLACK_NAME[mark])
  }
  // A Discord message in a thread lives in the thread's own channel.
  const channel = place.thread ?? c.channel
  if (replaces) yield* discordReaction(c.rest, "delete", channel, messageId, DISCORD_EMOJI[replaces])
  yield* discordReaction(c.rest, "put", channel, messageId, DISCORD_EMOJI[mark])
})

/** Discord's typing indicator in the place, for the next ten seconds (Slack bots have none). */
export const typingIn = (place: ChatPlace) =>
  Effect.gen(function*() {
    const c = yield* chatClient(place)
    if (c.provider !== "discord") return
    const channel = place.thread ?? c.channel
    yield* discordCall(`${placeText(place)} (typing)`, () => c.rest.post(`/channels/${channel}/typing`))
  })
