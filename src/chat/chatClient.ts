import type { REST } from "@discordjs/rest"
import type { WebClient } from "@slack/web-api"
import { Effect } from "effect"
import { OrgConfig } from "../config/OrgConfig.js"
import type { HostFiles } from "../config/Paths.js"
import { chatFor } from "../config/schema.js"
import type { ChatPlace } from "../contract/origin.js"
import { chatTokens } from "../vault/chatTokens.js"
import type { Vault } from "../vault/Vault.js"
import { ChatPostError } from "./ChatPostError.js"
import { discordRest } from "./discordRest.js"
import { slackWeb } from "./slackWeb.js"

/** The service's client for a mapped place, with the channel id as org.toml spells it. */
export type ChatClient =
  | { readonly provider: "slack"; readonly client: WebClient; readonly channel: string; readonly connection: string }
  | { readonly provider: "discord"; readonly rest: REST; readonly channel: string; readonly connection: string }

export const placeText = (p: ChatPlace) => `${p.provider} channel ${p.channel}${p.thread ? ` (thread ${p.thread})` : ""}`

/**
 * The client for a place org.toml maps, with the connection's token from the vault (the daemon
 * speaks; no box ever holds it). A place no `[[chat.channel]]` maps has none.
 */
export const chatClient = (place: ChatPlace): Effect.Effect<ChatClient, ChatPostError, OrgConfig | Vault | HostFiles> =>
  Effect.gen(function*() {
    const where = placeText(place)
    const org = yield* (yield* OrgConfig).snapshot.pipe(Effect.mapError((e) => new ChatPostError({ where, detail: e.message })))
    const mapped = chatFor(org, place)
    if (!mapped) return yield* new ChatPostError({ where, detail: `org.toml maps no [[chat.channel]] with id = "${place.channel}" for ${place.provider}` })
    const tokens = yield* chatTokens(place.provider, mapped.chat.connection).pipe(Effect.mapError((detail) => new ChatPostError({ where, detail })))
    return tokens.type === "slack"
      ? { provider: "slack" as const, client: yield* slackWeb(tokens.bot_token, mapped.chat.api_url), channel: mapped.channel.id, connection: mapped.chat.connection }
      : { provider: "discord" as const, rest: yield* discordRest(tokens.bot_token, mapped.chat.api_url), channel: mapped.channel.id, connection: mapped.chat.connection }
  })
