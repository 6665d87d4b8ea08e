import { Effect, Schema } from "effect"
import { type CardPlace, decisionsFor, type PendingApproval } from "../contract/approval.js"
import type { ChatPlace } from "../contract/origin.js"
import { chatClient } from "./chatClient.js"
import { ChatPostError } from "./ChatPostError.js"
import { slackEscape } from "./slackWeb.js"
import { APPROVAL_ACTION, type CardDecision, type CardPress } from "./cardPress.js"

/** Where a held request's card was posted: the message to edit once it is decided. */
export interface ApprovalCard {
  readonly place: ChatPlace
  /** The channel the card's message is in (Discord: the thread, when it is in one). */
  readonly channel: string
  /** The card's message: Slack's ts, Discord's id. */
  readonly ts: string
  /** Where it is, as a press must come from to decide its request. */
  readonly at: CardPlace
}

export const cardText = (v: PendingApproval) =>
  `[roster] ${v.worker}'s run ${v.run_id} asks for ${v.method} ${v.host}:${v.port}${v.path ?? ""}, ` +
  `${v.rule ? `which ${v.rule} asks a person about (approving lets this one request through). ` : "which the policy refuses. "}` +
  `It waits until ${v.expires_at.slice(11, 19)} UTC for a decision (${v.id}; also: roster approve ${v.id}).`

/** The card's buttons a held request takes (a rule's hold: once and deny only), with each provider's style. */
const cardButtons = (v: PendingApproval): ReadonlyArray<CardButton> =>
  CARD_BUTTONS.filter((b) => decisionsFor(v).includes(b.decision))

interface CardButton {
  readonly label: string
  readonly decision: CardDecision
  readonly slack?: "primary" | "danger"
  readonly discord: 1 | 3 | 4
}

const CARD_BUTTONS: ReadonlyArray<CardButton> = [
  { label: "Approve once", decision: "once", slack: "primary", discord: 3 },
  { label: "Approve for this run", decision: "run", discord: 1 },
  { label: "Deny", decision: "deny", slack: "danger", discord: 4 }
]

/** Slack's buttons (Block Kit): the action id carries the decision, the value the request. */
const slackButtons = (v: PendingApproval) =>
  cardButtons(v).map((b) => ({
    type: "button" as const,
    text: { type: "plain_text" as const, text: b.label },
    action_id: `${APPROVAL_ACTION}${b.decision}`,
    value: v.id,
    ...(b.slack ? { style: b.slack } : {})
  }))

const Created = Schema.Struct({ id: Schema.String })

/** Discord's buttons (message components): success, primary, danger; the custom id carries the decision and the request. */
const discordButtons = (v: PendingApproval) => [{
  type: 1,
  components: cardButtons(v).map((b) => ({ type: 2, style: b.discord, label: b.label, custom_id: `${APPROVAL_ACTION}${b.decision}:${v.id}` }))
}]

/**
 * A held request posted in the thread its run answers in, with Approve once / Approve for this
 * run / Deny buttons: Slack Block Kit (the presses come back over Socket Mode), Discord message
 * components (the presses come back as interactions on its gateway). No public URL either way.
 */
export const postApprovalCard = (place: ChatPlace, v: PendingApproval) =>
  Effect.gen(function*() {
    const c = yield* chatClient(place)
    const text = cardText(v)
    if (c.provider === "discord") {
      const channel = place.thread ?? c.channel
      const posted = yield* Effect.tryPromise({
        try: () =>
          c.rest.post(`/channels/${channel}/messages`, {
            body: {
              content: text,
              allowed_mentions: { parse: [] },
              components: discordButtons(v),
              ...(place.message && !place.thread ? { message_reference: { message_id: place.message, fail_if_not_exists: false } } : {})
            }
          }),
        catch: (e) => new ChatPostError({ where: `discord channel ${channel}`, detail: e instanceof Error ? e.message : String(e) })
      })
      const id = Schema.decodeUnknownOption(Created)(posted)
      if (id._tag === "None") return undefined
      const at: CardPlace = { provider: "discord", connection: c.connection, channel: c.channel, ...(place.thread ? { thread: place.thread } : {}), message: id.value.id }
      return { place, channel, ts: id.value.id, at } satisfies ApprovalCard
    }
    const r = yield* Effect.tryPromise({
      try: () =>
        c.client.chat.postMessage({
          channel: c.channel,
          ...(place.thread ? { thread_ts: place.thread } : {}),
          // The host and path are the box's words: escaped in the notification text as in the blocks (no <!channel> from a path).
          text: slackEscape(text),
          blocks: [
            { type: "section" as const, text: { type: "mrkdwn" as const, text: slackEscape(text) } },
            {
              type: "actions" as const,
              block_id: "roster_approval",
              elements: slackButtons(v)
            }
          ],
          unfurl_links: false,
          unfurl_media: false
        }),
      catch: (e) => new ChatPostError({ where: `slack channel ${c.channel}`, detail: e instanceof Error ? e.message : String(e) })
    })
    if (!r.ts) return undefined
    // Slack: a card in a thread is pressed with its thread's ts; one at the top of the channel, with its own.
    const at: CardPlace = { provider: "slack", connection: c.connection, channel: c.channel, thread: place.thread ?? r.ts, message: r.ts }
    return { place, channel: c.channel, ts: r.ts, at } satisfies ApprovalCard
  })

/** The card edited to how the hold ended (who decided, and where): its buttons gone. */
export const closeApprovalCard = (card: ApprovalCard, text: string) =>
  Effect.gen(function*() {
    const c = yield* chatClient(card.place)
    if (c.provider === "discord") {
      return yield* Effect.tryPromise({
        try: () => c.rest.patch(`/channels/${card.channel}/messages/${card.ts}`, { body: { content: text, components: [] } }),
        catch: (e) => new ChatPostError({ where: `discord channel ${card.channel}`, detail: e instanceof Error ? e.message : String(e) })
      }).pipe(Effect.asVoid)
    }
    yield* Effect.tryPromise({
      try: () => c.client.chat.update({ channel: card.channel, ts: card.ts, text: slackEscape(text), blocks: [{ type: "section" as const, text: { type: "mrkdwn" as const, text: slackEscape(text) } }] }),
      catch: (e) => new ChatPostError({ where: `slack channel ${card.channel}`, detail: e instanceof Error ? e.message : String(e) })
    })
  })

/**
 * The answer to a press: a word only the presser sees (a press not theirs to make, or too late),
 * or, with no text, a silent acknowledgement (Discord wants one within 3 s; the card is edited
 * by the hold itself as it ends). Slack: an ephemeral message; Discord: the interaction's reply.
 */
export const answerPress = (place: ChatPlace, p: CardPress, text?: string) =>
  Effect.gen(function*() {
    const c = yield* chatClient(place)
    if (c.provider === "discord") {
      const i = p.interaction
      if (!i) return
      // 4: a message in reply, 64: only the presser sees it; 6: acknowledged, the message left as it is.
      const body = text === undefined ? { type: 6 } : { type: 4, data: { content: text, flags: 64, allowed_mentions: { parse: [] } } }
      return yield* Effect.tryPromise({
        try: () => c.rest.post(`/interactions/${i.id}/${i.token}/callback`, { body, auth: false }),
        catch: (e) => new ChatPostError({ where: `discord interaction ${i.id}`, detail: e instanceof Error ? e.message : String(e) })
      }).pipe(Effect.asVoid)
    }
    if (text === undefined) return
    const user = p.user
    yield* Effect.tryPromise({
      try: () => c.client.chat.postEphemeral({ channel: c.channel, user, text, ...(place.thread ? { thread_ts: place.thread } : {}) }),
      catch: (e) => new ChatPostError({ where: `slack channel ${c.channel}`, detail: e instanceof Error ? e.message : String(e) })
    })
  })
