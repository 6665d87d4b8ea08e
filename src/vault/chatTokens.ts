import { Effect, Option, Schema } from "effect"
import type { HostFiles } from "../config/Paths.js"
import { Vault } from "./Vault.js"

/** A Slack connection: the bot token posts and reads, the app-level token opens Socket Mode. */
export const SlackTokens = Schema.Struct({
  type: Schema.Literal("slack"),
  bot_token: Schema.String.pipe(Schema.startsWith("xoxb-")),
  app_token: Schema.String.pipe(Schema.startsWith("xapp-")),
  added_at: Schema.optional(Schema.String)
})
export type SlackTokens = typeof SlackTokens.Type

/** A Discord connection: one bot token for the REST API and the gateway socket. */
export const DiscordTokens = Schema.Struct({
  type: Schema.Literal("discord"),
  bot_token: Schema.NonEmptyString,
  added_at: Schema.optional(Schema.String)
})
export type DiscordTokens = typeof DiscordTokens.Type

export type ChatTokens = SlackTokens | DiscordTokens

/** The kind of connection a name makes: `slack`/`slack-*` and `discord`/`discord-*` hold a chat service's tokens. */
export const chatProviderOf = (name: string): "slack" | "discord" | null =>
  /^slack($|[-._])/.test(name) ? "slack" : /^discord($|[-._])/.test(name) ? "discord" : null

/** A chat connection's tokens, decoded; the error says which connection to add. */
export const chatTokens = (provider: "slack" | "discord", name: string): Effect.Effect<ChatTokens, string, HostFiles | Vault> =>
  Effect.gen(function*() {
    const entry = yield* (yield* Vault).get(name)
    const fix = `roster connection add ${name}`
    if (entry === undefined) return yield* Effect.fail(`there is no connection "${name}" in the vault: ${fix}`)
    const decoded: Option.Option<ChatTokens> = provider === "slack"
      ? Schema.decodeUnknownOption(SlackTokens)(entry)
      : Schema.decodeUnknownOption(DiscordTokens)(entry)
    return Option.isSome(decoded)
      ? decoded.value
      : yield* Effect.fail(`the connection "${name}" does not hold ${provider} tokens: add it again with ${fix}`)
  })
