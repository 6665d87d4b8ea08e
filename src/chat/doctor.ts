import { Effect } from "effect"
import { OrgConfig } from "../config/OrgConfig.js"
import { discordRest, discordWho } from "./discordRest.js"
import { slackWeb, slackWho } from "./slackWeb.js"
import { chatTokens } from "../vault/chatTokens.js"
import { listWorkers } from "../worker/workers.js"

/** One `[[chat]]` as `roster doctor` checks it: does its connection answer, and what each channel maps to. */
export interface ChatCheck {
  readonly provider: "slack" | "discord"
  readonly connection: string
  readonly ok: boolean
  /** Who the bot is when the service answered; else what is wrong and the fix. */
  readonly detail: string
  readonly channels: ReadonlyArray<{ readonly id: string; readonly worker: string; readonly worker_exists: boolean; readonly allow_users: number }>
}

/** Each `[[chat]]`'s connection tried with an auth call (the service's own), and its channels' mapping. */
export const checkChats = Effect.gen(function*() {
  const org = yield* (yield* OrgConfig).snapshot.pipe(Effect.option)
  if (org._tag === "None") return []
  // listWorkers says itself what it could not read (namesIn); a channel's worker then shows as missing.
  const workers = new Set(yield* listWorkers.pipe(Effect.orElseSucceed(() => [] as ReadonlyArray<string>)))
  return yield* Effect.forEach(org.value.chat, (chat) =>
    Effect.gen(function*() {
      const channels = chat.channel.map((c) => ({ id: c.id, worker: c.worker, worker_exists: workers.has(c.worker), allow_users: c.allow_users.length }))
      const tokens = yield* chatTokens(chat.provider, chat.connection).pipe(Effect.either)
      if (tokens._tag === "Left") return { provider: chat.provider, connection: chat.connection, ok: false, detail: tokens.left, channels }
      const t = tokens.right
      const who = t.type === "slack"
        ? yield* slackWeb(t.bot_token, chat.api_url).pipe(Effect.flatMap(slackWho)).pipe(Effect.map((w) => `bot ${w.user} (${w.userId}) of ${w.team}`), Effect.either)
        : yield* discordRest(t.bot_token, chat.api_url).pipe(Effect.flatMap(discordWho)).pipe(Effect.map((w) => `bot ${w.username} (${w.id})`), Effect.either)
      return who._tag === "Right"
        ? { provider: chat.provider, connection: chat.connection, ok: true, detail: who.right, channels }
        : { provider: chat.provider, connection: chat.connection, ok: false, detail: `${who.left.detail} — add the bot token again: roster connection add ${chat.connection}`, channels }
    }))
})
