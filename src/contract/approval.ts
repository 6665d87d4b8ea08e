import { Schema } from "effect"

const APPROVAL_ID = /^ap-[0-9a-f]{8}$/
export const isApprovalId = (id: string): boolean => APPROVAL_ID.test(id)
/** A held request's id (`ap-` and 8 hex), the only form the control API's paths take. */
export const ApprovalId = Schema.String.pipe(Schema.filter((s) => isApprovalId(s) || `"${s}" is not a held request's id`))

/**
 * Where a held request's card was posted: the connection (`[[chat]]`) it went through, the mapped
 * channel, the thread, and the card's own message. A press decides the request only from there.
 */
export const CardPlace = Schema.Struct({
  provider: Schema.Literal("slack", "discord"),
  connection: Schema.String,
  channel: Schema.String,
  thread: Schema.optional(Schema.String),
  /** The card's message: Slack's ts, Discord's message id. */
  message: Schema.String
})
export type CardPlace = typeof CardPlace.Type

/** Where a press came from, as the service said it: the connection it arrived on, the channel, thread and message pressed. */
export interface PressPlace {
  readonly provider: "slack" | "discord"
  readonly connection: string
  readonly channel: string
  readonly thread: string | undefined
  readonly message: string | undefined
}

/** Why a press does not decide a request whose card is at `card` (undefined when it does): it must be that card, pressed there. */
export const pressRefusal = (card: CardPlace | undefined, press: PressPlace): string | undefined => {
  if (card === undefined) return "its request has no card in a chat thread: decide it with roster approve or roster web"
  const same = card.provider === press.provider && card.connection === press.connection && card.channel.toLowerCase() === press.channel.toLowerCase() &&
    press.message === card.message && (card.thread === undefined || press.thread === undefined || press.thread === card.thread)
  return same ? undefined : "that button is not on this request's card: a request is decided only from the thread its card was posted in"
}

/** The place and card in words, for the audit line and the log. */
export const cardPlaceText = (c: CardPlace) =>
  `${c.provider} channel ${c.channel}${c.thread ? ` thread ${c.thread}` : ""} (connection ${c.connection}), card ${c.message}`

/** A request the gateway's policy refused, held while a person decides (`[gateway] approvals = "ask"`). */
export const PendingApproval = Schema.Struct({
  id: Schema.String,
  run_id: Schema.String,
  worker: Schema.String,
  subject: Schema.String,
  method: Schema.String,
  host: Schema.String,
  port: Schema.Number,
  /** The path without its query; null for a CONNECT (only host and port are known). */
  path: Schema.NullOr(Schema.String),
  asked_at: Schema.String,
  /** When it gets its 403 if no one decides. */
  expires_at: Schema.String,
  /** The fleet node whose gateway holds it (under `[cluster]`). */
  node: Schema.optional(Schema.String),
  /** Its card in a chat thread, once posted: the only place a press decides it. */
  card: Schema.optional(CardPlace),
  /**
   * Held by a grant's request rule that asks (`[[grant]] "github" rule 2 (…)`), not by a refusal: it is
   * approved once or denied — the rule asks again for the next request, so never for the run or for good.
   */
  rule: Schema.optional(Schema.String)
})
export type PendingApproval = typeof PendingApproval.Type

/** once: this request; run: this host:port for the rest of the run; always: an [[allow]] in org.toml; deny: the 403 now. */
export const ApprovalDecision = Schema.Literal("once", "run", "always", "deny")
export type ApprovalDecision = typeof ApprovalDecision.Type

/** The decisions a held request takes: a rule's hold once or deny only (its rule asks about each request). */
export const decisionsFor = (v: Pick<PendingApproval, "rule">): ReadonlyArray<ApprovalDecision> =>
  v.rule === undefined ? ["once", "run", "always", "deny"] : ["once", "deny"]

/** Why `decision` cannot decide `v` (undefined when it can), with what can. */
export const decisionRefusal = (v: Pick<PendingApproval, "rule" | "id">, decision: ApprovalDecision): string | undefined =>
  decisionsFor(v).includes(decision) ? undefined
    : `${v.id} is held by ${v.rule ?? "a rule"}, which asks about each request: approve it once (roster approve ${v.id}) or deny it`
