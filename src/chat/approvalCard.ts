import { Effect, Schema } from "effect"
import type { PendingApproval } from "../contract/approval.js"
import type { ChatPlace } from "../contract/origin.js"
import { chatClient } from "./chatClient.js"
import { ChatPostError } from "./ChatPostError.js"

/** Where a held request's card was posted: the message to edit once it is decided. */
export interface ApprovalCard {
  readonly place: ChatPlace
  readonly channel: string
  readonly ts: string
}

/** The buttons' action ids: the decision is the part after the prefix, the held request's id the value. */
export const APPROVAL_ACTION = "roster_approval_"
export const CardDecision = Schema.Literal("once", "run", "deny")
export type CardDecision = typeof CardDecision.Type

/** `<`, `>` and `&` as Slack's mrkdwn needs them: a host or path cannot become a mention or a link. */
const escape = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")

export const cardText = (v: PendingApproval) =>
  `[roster] ${v.worker}'s run ${v.run_id} asks for ${v.method} ${v.host}:${v.port}${v.path ?? ""}, which the policy refuses. ` +
  `It waits until ${v.expires_at.slice(11, 19)} UTC for a decision (${v.id}; also: roster approve ${v.id}).`

const button = (text: string, decision: CardDecision, id: string, style?: "primary" | "danger") => ({
  type: "button" as const,
  text: { type: "plain_text" as const, text },
  action_id: `${APPROVAL_ACTION}${decision}`,
  value: id,
  ...(style ? { style } : {})
})

/**
 * A held request posted in the thread its run answers in, with Approve once / Approve for this
 * run / Deny buttons (Slack Block Kit; the presses come back over Socket Mode). Slack only: a
 * Discord place gets none yet (its people decide with the CLI or the web).
 */
export const postApprovalCard = (place: ChatPlace, v: PendingApproval) =>
  Effect.gen(function*() {
    const c = yield* chatClient(place)
    if (c.provider !== "slack") return undefined
    const text = cardText(v)
    const r = yield* Effect.tryPromise({
      try: () =>
        c.client.chat.postMessage({
          channel: c.channel,
          ...(place.thread ? { thread_ts: place.thread } : {}),
          text,
          blocks: [
            { type: "section" as const, text: { type: "mrkdwn" as const, text: escape(text) } },
            {
              type: "actions" as const,
              block_id: "roster_approval",
              elements: [button("Approve once", "once", v.id, "primary"), button("Approve for this run", "run", v.id), button("Deny", "deny", v.id, "danger")]
            }
          ],
          unfurl_links: false,
          unfurl_media: false
        }),
      catch: (e) => new ChatPostError({ where: `slack channel ${c.channel}`, detail: e instanceof Error ? e.message : String(e) })
    })
    return { place, channel: c.channel, ts: r.ts ?? "" } satisfies ApprovalCard
  })

/** The card edited to how the hold ended (who decided, and where): its buttons gone. */
export const closeApprovalCard = (card: ApprovalCard, text: string) =>
  Effect.gen(function*() {
    const c = yield* chatClient(card.place)
    if (c.provider !== "slack") return
    yield* Effect.tryPromise({
      try: () => c.client.chat.update({ channel: card.channel, ts: card.ts, text, blocks: [{ type: "section" as const, text: { type: "mrkdwn" as const, text: escape(text) } }] }),
      catch: (e) => new ChatPostError({ where: `slack channel ${card.channel}`, detail: e instanceof Error ? e.message : String(e) })
    })
  })

/** A word only the pressing person sees (Slack's ephemeral message): a press that is not theirs to make, or too late. */
export const tellPresser = (place: ChatPlace, user: string, text: string) =>
  Effect.gen(function*() {
    const c = yield* chatClient(place)
    if (c.provider !== "slack") return
    yield* Effect.tryPromise({
      try: () => c.client.chat.postEphemeral({ channel: c.channel, user, text, ...(place.thread ? { thread_ts: place.thread } : {}) }),
      catch: (e) => new ChatPostError({ where: `slack channel ${c.channel}`, detail: e instanceof Error ? e.message : String(e) })
    })
  })
