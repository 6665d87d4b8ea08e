import { type ChatChannel, chatChannelOf, type ChatRule } from "../config/schema.js"
import type { MessageFile } from "../contract/messageFile.js"

/** A message as a listener hands it over: where, who, what, and whether it names the bot. */
export interface ChatEvent {
  readonly provider: "slack" | "discord"
  readonly channel: string
  /** The thread the message is in, if it is a reply in one. */
  readonly thread?: string | undefined
  /** The message's own id (Slack's ts, Discord's snowflake): a new thread starts at it. */
  readonly id: string
  readonly user: string
  readonly text: string
  /** Whether it mentions the bot (the service's own mention markup). */
  readonly mentionsBot: boolean
  /** A bot's message (roster's own among them): never a turn, so two bots cannot talk each other into a loop. */
  readonly fromBot: boolean
  /** The files it carries (Slack's `files`, Discord's `attachments`). */
  readonly files?: ReadonlyArray<MessageFile> | undefined
}

/** What becomes of one message: nothing, a stranger counted, or a turn of the channel's worker. */
export type Admission =
  | { readonly _tag: "ignore"; readonly why: "unmapped" | "bot" | "no-mention" | "empty" }
  | { readonly _tag: "stranger"; readonly channel: ChatChannel }
  | { readonly _tag: "turn"; readonly channel: ChatChannel; readonly text: string; readonly cut: boolean; readonly files: ReadonlyArray<MessageFile> }

/** Slack's `<@U123>` and Discord's `<@123>` / `<@!123>` of the bot, taken out of the words the worker reads. */
export const withoutMention = (text: string, botId: string) =>
  botId === "" ? text.trim() : text.replace(new RegExp(`<@!?${botId.replace(/[^A-Za-z0-9]/g, "")}(\\|[^>]*)?>`, "g"), "").replace(/\s+/g, " ").trim()

/**
 * The gate every chat message passes before anything else happens: a channel org.toml maps, a
 * person (not a bot), in `allow_users`, and — with `respond = "mention"` — naming the bot. A
 * message over `message_max` is cut there (the worker is told), never passed whole.
 */
export const admit = (chat: ChatRule, e: ChatEvent, botId: string): Admission => {
  const channel = chatChannelOf(chat, e.channel)
  if (!channel) return { _tag: "ignore", why: "unmapped" }
  if (e.fromBot || (botId !== "" && e.user === botId)) return { _tag: "ignore", why: "bot" }
  if (!channel.allow_users.includes(e.user)) return { _tag: "stranger", channel }
  if (chat.respond === "mention" && !e.mentionsBot) return { _tag: "ignore", why: "no-mention" }
  const words = withoutMention(e.text, botId)
  const files = e.files ?? []
  if (words === "" && files.length === 0) return { _tag: "ignore", why: "empty" }
  const cut = words.length > chat.message_max
  // A message of files alone is a turn: its files are the words.
  const text = words === "" ? "(no words: this message brings the files below)" : cut ? words.slice(0, chat.message_max) : words
  return { _tag: "turn", channel, text, cut, files }
}

/** A sliding minute of turn starts: admitted while fewer than `perMin` began in the last 60 s. */
export const takeTurn = (starts: ReadonlyArray<number>, now: number, perMin: number): { readonly ok: boolean; readonly starts: ReadonlyArray<number> } => {
  const recent = starts.filter((t) => now - t < 60_000)
  return recent.length < perMin ? { ok: true, starts: [...recent, now] } : { ok: false, starts: recent }
}
