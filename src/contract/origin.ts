import { Schema } from "effect"
import { ChannelName, RunId, TaskId } from "../config/names.js"

/** A chat message's place: the service, the channel's id there, and the thread when it has one. */
export const ChatPlace = Schema.Struct({
  provider: Schema.Literal("slack", "discord"),
  channel: Schema.String,
  /** Slack: the thread's ts. Discord: a thread channel in the mapped channel. */
  thread: Schema.optional(Schema.String),
  /** Discord: the message an answer replies to, outside a thread (Slack threads on the message itself). */
  message: Schema.optional(Schema.String)
})
export type ChatPlace = typeof ChatPlace.Type

/**
 * Who queued a task: a person (the CLI, the web UI, the API), a worker for itself (set_tasks,
 * from a run), or a chat message. `by`, `run_id` and `task_id` are the original record; `via`
 * and `chat` were added later and are optional, so every older record still reads.
 */
export const TaskOrigin = Schema.Struct({
  by: Schema.Literal("person", "self", "chat"),
  run_id: Schema.NullOr(RunId),
  task_id: Schema.NullOr(TaskId),
  /** A person's way in. */
  via: Schema.optional(Schema.Literal("cli", "web", "api")),
  /** A chat message's place and author. */
  chat: Schema.optional(Schema.Struct({ ...ChatPlace.fields, author: Schema.String })),
  /** The chat channel whose budget the queuing run was charged to (a chat session, or work it queued): the task is too. */
  chat_channel: Schema.optional(Schema.String)
})
export type TaskOrigin = typeof TaskOrigin.Type

/** Where a run's work came from, as its context records it. */
export const RunOrigin = Schema.Union(
  /** A person started it directly: `roster worker run`, `roster talk`, the web's Talk page, an embedding program. */
  Schema.TaggedStruct("person", { via: Schema.Literal("cli", "web", "api", "embed") }),
  /** The daemon ran a queued task; `queued_by` is the task's own origin. */
  Schema.TaggedStruct("queue", { task_id: TaskId, queued_by: TaskOrigin }),
  /** A chat message in a mapped channel. */
  Schema.TaggedStruct("chat", { ...ChatPlace.fields, author: Schema.String })
)
export type RunOrigin = typeof RunOrigin.Type

/**
 * Where a task's answer goes when it ends: a live talk session (`talk:<run-id>`), another task's
 * record (`task:<id>`), a chat thread (`chat:<provider>:<channel>[/<thread>]`), or nowhere.
 */
export type ReplyTarget =
  | { readonly _tag: "talk"; readonly runId: string }
  | { readonly _tag: "task"; readonly taskId: string }
  | { readonly _tag: "chat"; readonly provider: "slack" | "discord"; readonly channel: string; readonly thread: string | null }
  | { readonly _tag: "none" }

const CHAT_ID = /^[A-Za-z0-9._-]{1,64}$/

/** A reply_to as written (`roster task add --reply-to`, set_tasks), checked; the error says what a target looks like. */
export const parseReplyTo = (text: string): ReplyTarget | { readonly _tag: "invalid"; readonly why: string } => {
  const t = text.trim()
  if (t === "none") return { _tag: "none" }
  const talk = /^talk:(.+)$/.exec(t)
  if (talk) return Schema.is(RunId)(talk[1]) ? { _tag: "talk", runId: talk[1] as string } : { _tag: "invalid", why: `talk:${talk[1]}: not a run id` }
  const task = /^task:(.+)$/.exec(t)
  if (task) return Schema.is(TaskId)(task[1]) ? { _tag: "task", taskId: task[1] as string } : { _tag: "invalid", why: `task:${task[1]}: not a task id` }
  const chat = /^chat:(slack|discord):([^/]+)(?:\/(.+))?$/.exec(t)
  if (chat && CHAT_ID.test(chat[2] ?? "") && (chat[3] === undefined || CHAT_ID.test(chat[3]))) {
    return { _tag: "chat", provider: chat[1] as "slack" | "discord", channel: chat[2] as string, thread: chat[3] ?? null }
  }
  return { _tag: "invalid", why: `"${t}" is not a reply target: use talk:<run-id>, task:<task-id>, chat:slack:<channel>[/<thread>], chat:discord:<channel>[/<thread>] or none` }
}

/** A roster channel name of a chat place: `slack-<id lowercased>` / `discord-<id>`. */
export const chatChannelName = (p: Pick<ChatPlace, "provider" | "channel">) =>
  Schema.decodeSync(ChannelName)(`${p.provider}-${p.channel.toLowerCase()}`.slice(0, 64))

/**
 * The key a chat channel's spending is counted under (`[[chat.channel]] budget_usd_day`, `roster
 * usage --channel`): `slack:<id>` / `discord:<id>`, the id lowercased as the services compare it.
 */
export const chatChannelKey = (p: Pick<ChatPlace, "provider" | "channel">) => `${p.provider}:${p.channel.toLowerCase()}`

/** A channel key as typed (`slack:C0123ABCD`), checked and normalised; undefined when it is not one. */
export const parseChatChannelKey = (text: string): { readonly provider: "slack" | "discord"; readonly channel: string; readonly key: string } | undefined => {
  const m = /^(slack|discord):([A-Za-z0-9._-]{1,64})$/.exec(text.trim())
  if (!m) return undefined
  const place = { provider: m[1] as "slack" | "discord", channel: m[2] as string }
  return { ...place, key: chatChannelKey(place) }
}

/** The chat channel a run is charged to: a chat session's own, or the one its queuing run was. */
export const chargedChannel = (origin: RunOrigin): string | undefined =>
  origin._tag === "chat"
    ? chatChannelKey(origin)
    : origin._tag === "queue"
    ? origin.queued_by.chat_channel ?? (origin.queued_by.chat ? chatChannelKey(origin.queued_by.chat) : undefined)
    : undefined
