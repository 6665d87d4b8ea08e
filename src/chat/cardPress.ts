import { Option, Schema } from "effect"
import { APPROVAL_ACTION, CardDecision } from "./approvalCard.js"

/** A press of one of a held request's buttons: who, where, which request, which decision. */
export interface CardPress {
  readonly provider: "slack" | "discord"
  readonly channel: string
  /** The card's thread (Slack: the thread_ts of the card's message), so a word to the presser lands beside it. */
  readonly thread: string | undefined
  readonly user: string
  readonly approvalId: string
  readonly decision: CardDecision
}

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
    provider: "slack", channel: b.channel.id, thread: b.message?.thread_ts ?? b.message?.ts, user: b.user.id, approvalId: action.value, decision
  }
}
