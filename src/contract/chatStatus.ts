import { Schema } from "effect"

/**
 * One `[[chat]]` listener as `server status` and the web's Now page show it: whether it is
 * connected, what failed last, and what it turned away (strangers are counted, never served).
 */
export const ChatListenerStatus = Schema.Struct({
  provider: Schema.Literal("slack", "discord"),
  connection: Schema.String,
  state: Schema.Literal("connecting", "connected", "reconnecting", "failing", "stopped"),
  /** What failed last (a refused token, a dropped socket), with the fix where roster knows it. */
  detail: Schema.NullOr(Schema.String),
  since: Schema.String,
  channels: Schema.Array(Schema.Struct({ id: Schema.String, worker: Schema.String, session: Schema.NullOr(Schema.String) })),
  /** Messages from users not in a channel's allow_users: ignored. */
  ignored: Schema.Number,
  /** Messages over a channel's turns_per_min: refused politely. */
  limited: Schema.Number,
  turns: Schema.Number
})
export type ChatListenerStatus = typeof ChatListenerStatus.Type
