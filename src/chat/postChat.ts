import { Effect } from "effect"
import { OrgConfig } from "../config/OrgConfig.js"
import type { HostFiles } from "../config/Paths.js"
import { chatFor } from "../config/schema.js"
import type { ChatPlace } from "../contract/origin.js"
import { chatTokens } from "../vault/chatTokens.js"
import type { Vault } from "../vault/Vault.js"
import { ChatPostError } from "./ChatPostError.js"
import type { PostMark } from "./postMark.js"
import { discordPost, discordRest } from "./discordRest.js"
import { slackPost, slackWeb } from "./slackWeb.js"
import { CHAT_MESSAGE_MAX, splitMessage } from "./split.js"

export const placeText = (p: ChatPlace) => `${p.provider} channel ${p.channel}${p.thread ? ` (thread ${p.thread})` : ""}`

/**
 * Posts text to a mapped chat place for a worker (its answer, a notice, a delivery): only a
 * channel org.toml maps, with the connection's token from the vault (the daemon posts; no box
 * ever holds it), split the way the service requires. Answers each posted message's id. A delivery
 * passes its mark, so one cut by a crash is found in the place rather than posted twice.
 */
export const postChat = Effect.fn("chat.post")(function*(place: ChatPlace, text: string, mark?: PostMark): Effect.fn.Return<
  ReadonlyArray<string>,
  ChatPostError,
  OrgConfig | Vault | HostFiles
> {
  const where = placeText(place)
  const org = yield* (yield* OrgConfig).snapshot.pipe(Effect.mapError((e) => new ChatPostError({ where, detail: e.message })))
  const mapped = chatFor(org, place)
  if (!mapped) return yield* new ChatPostError({ where, detail: `org.toml maps no [[chat.channel]] with id = "${place.channel}" for ${place.provider}` })
  const tokens = yield* chatTokens(place.provider, mapped.chat.connection).pipe(Effect.mapError((detail) => new ChatPostError({ where, detail })))
  const parts = splitMessage(text, CHAT_MESSAGE_MAX[place.provider])
  return tokens.type === "slack"
    ? yield* slackPost(yield* slackWeb(tokens.bot_token, mapped.chat.api_url), mapped.channel.id, place.thread, parts, mark)
    : yield* discordPost(yield* discordRest(tokens.bot_token, mapped.chat.api_url), { ...place, channel: mapped.channel.id }, parts, mark)
})
