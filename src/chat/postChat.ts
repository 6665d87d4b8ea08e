import { Effect } from "effect"
import type { OrgConfig } from "../config/OrgConfig.js"
import type { HostFiles } from "../config/Paths.js"
import type { ChatPlace } from "../contract/origin.js"
import type { Vault } from "../vault/Vault.js"
import { chatClient } from "./chatClient.js"
import type { ChatPostError } from "./ChatPostError.js"
import type { PostMark } from "./postMark.js"
import { discordPost } from "./discordRest.js"
import { slackPost } from "./slackWeb.js"
import { CHAT_MESSAGE_MAX, splitMessage } from "./split.js"

export { placeText } from "./chatClient.js"

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
  const c = yield* chatClient(place)
  const parts = splitMessage(text, CHAT_MESSAGE_MAX[place.provider])
  return c.provider === "slack"
    ? yield* slackPost(c.client, c.channel, place.thread, parts, mark)
    : yield* discordPost(c.rest, { ...place, channel: c.channel }, parts, mark)
})
