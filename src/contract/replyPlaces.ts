import { parseReplyTo, type ReplyTarget } from "./origin.js"
import type { RunContext } from "./runContext.js"

/** A reply target written the one way roster writes it (so two spellings of one place compare equal). */
export const placeKey = (t: ReplyTarget): string => {
  switch (t._tag) {
    case "talk":
      return `talk:${t.runId}`
    case "task":
      return `task:${t.taskId}`
    case "chat":
      return `chat:${t.provider}:${t.channel}${t.thread !== null ? `/${t.thread}` : ""}`
    case "none":
      return "none"
  }
}

/**
 * The places a run's answers may go: where its own answer goes (its reply_to), the talk session
 * it is, the task it runs for, the chat thread it serves. A worker replies only to these — never
 * to a place it names — so it cannot write into another worker's task, session or channel.
 */
export const ownPlaces = (ctx: RunContext): ReadonlyArray<string> => {
  const places = new Set<string>(["none"])
  const inherited = ctx.reply_to === null ? undefined : parseReplyTo(ctx.reply_to)
  if (inherited && inherited._tag !== "invalid") places.add(placeKey(inherited))
  if (ctx.surface === "term-session" || ctx.surface === "web-session") places.add(`talk:${ctx.run_id}`)
  if (ctx.task_id !== null) places.add(`task:${ctx.task_id}`)
  if (ctx.surface === "chat-session" && ctx.chat) {
    places.add(placeKey({ _tag: "chat", provider: ctx.chat.provider, channel: ctx.chat.channel, thread: ctx.chat.thread ?? null }))
  }
  return [...places]
}

/** Whether `target` is one of the run's own places (see ownPlaces). */
export const isOwnPlace = (ctx: RunContext, target: ReplyTarget) => ownPlaces(ctx).includes(placeKey(target))

/** The place a run's follow-up answers by default: its own reply_to, else the chat thread it serves. */
export const inheritedPlace = (ctx: RunContext | undefined): string | null =>
  ctx?.reply_to ??
    (ctx?.surface === "chat-session" && ctx.chat
      ? placeKey({ _tag: "chat", provider: ctx.chat.provider, channel: ctx.chat.channel, thread: ctx.chat.thread ?? null })
      : null)
