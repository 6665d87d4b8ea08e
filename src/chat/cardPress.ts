import { Option, Schema } from "effect"

/** The buttons' action ids: the decision is the part after the prefix, the held request's id the value. */
export const APPROVAL_ACTION = "roster_approval_"
export const CardDecision = Schema.Literal("once", "run", "deny")
export type CardDecision = typeof CardDecision.Type

/** A press of one of a held request's buttons: who, where, which request, which decision. */
export interface CardPress {
  readonly provider: "slack" | "discord"
  readonly channel: string
  /** The card's thread (Slack: the thread_ts of the card's message), so a word to the presser lands beside it. */
  readonly thread: string | undefined
  readonly user: string
  /** The message whose button was pressed (Slack: its ts; Discord: its id): the card must be the request's own. */
  readonly message: string | undefined
  readonly approvalId: string
  readonly decision: CardDecision
  /** Discord: the interaction to answer (within 3 s, or the person sees "interaction failed"); its reply is the presser's alone. */
  readonly interaction?: { readonly id: string; readonly token: string }
}

/** The parts of Discord's INTERACTION_CREATE for a button roster reads (type 3: a message component). */
const ComponentInteraction = Schema.Struct({
  id: Schema.String,
  token: Schema.String,
  type: Schema.Literal(3),
  channel_id: Schema.String,
  data: Schema.Struct({ custom_id: Schema.String }),
  message: Schema.optional(Schema.Struct({ id: Schema.String })),
  member: Schema.optional(Schema.Struct({ user: Schema.Struct({ id: Schema.String }) })),
  user: Schema.optional(Schema.Struct({ id: Schema.String }))
})

/** A button interaction as a press of a roster card's button, its channel resolved to the mapped one (a thread's parent) by `where`. */
export const discordPress = (raw: unknown, where: { readonly channel: string; readonly thread: string | undefined }): CardPress | undefined => {
  const decoded = Schema.decodeUnknownOption(ComponentInteraction)(raw)
  if (Option.isNone(decoded)) return undefined
  const i = decoded.value
  const m = new RegExp(`^${APPROVAL_ACTION}([a-z]+):(ap-[0-9a-f]{8})$`).exec(i.data.custom_id)
  const user = i.member?.user.id ?? i.user?.id
  if (!m || !Schema.is(CardDecision)(m[1]) || user === undefined) return undefined
  return {
    provider: "discord", channel: where.channel, thread: where.thread, user, message: i.message?.id, approvalId: m[2] as string, decision: m[1],
    interaction: { id: i.id, token: i.token }
  }
}

/** The interaction's channel id, to resolve before {@link discordPress}. */
export const interactionChannel = (raw: unknown) =>
  Option.getOrUndefined(Schema.decodeUnknownOption(Schema.Struct({ type: Schema.Literal(3), channel_id: Schema.String }))(raw))?.channel_id

/** The parts of Slack's block_actions payload roster reads (it arrives as a Socket Mode `interactive` envelope). */
const BlockActions = Schema.Struct({
  type: Schema.Literal("block_actions"),
  user: Schema.Struct({ id: Schema.String }),
  channel: Schema.Struct({ id: Schema.String }),
  message: Schema.optional(Schema.Struct({ ts: Schema.String, thread_ts: Schema.optional(Schema.String) })),
  actions: Schema.NonEmptyArray(Schema.Struct({ action_id: Schema.String, value: Schema.optional(Schema.String) }))
})

/** A block_actions payload as a press of a roster card's button; anything else (another app's blocks) is none. */
export const slackPress = (body: unknown): CardPress | undefined => {
  const decoded = Schema.decodeUnknownOption(BlockActions)(body)
  if (Option.isNone(decoded)) return undefined
  const b = decoded.value
  const action = b.actions[0]
  const decision = action.action_id.startsWith(APPROVAL_ACTION) ? action.action_id.slice(APPROVAL_ACTION.length) : ""
  if (!Schema.is(CardDecision)(decision) || action.value === undefined) return undefined
  return {
    provider: "slack", channel: b.channel.id, thread: b.message?.thread_ts ?? b.message?.ts, user: b.user.id, message: b.message?.ts, approvalId: action.value,
    decision
  }
}
