import { Context, type Effect, type Option, Schema } from "effect"
import type { ApprovalDecision, CardPlace, PendingApproval } from "./approval.js"

/** A decision on a held request, and who made it. */
export interface BoardDecision {
  readonly decision: ApprovalDecision
  readonly by: string
  /** A chat card's place and card, when it was decided with its button. */
  readonly where?: string | undefined
}

/** The fleet's board did not answer (its database). */
export class BoardSilent extends Schema.TaggedError<BoardSilent>()("BoardSilent", { detail: Schema.String }) {
  override get message() {
    return `the fleet's database did not answer (${this.detail})`
  }
}

/**
 * Held requests where every node of a fleet sees them: a gateway holds a request on its own node
 * (the connection waits there), posts it here, and takes the decision a person made on any node.
 * Absent on a machine on its own: its gateway's requests are decided through its own daemon.
 */
export class ApprovalBoard extends Context.Tag("roster/ApprovalBoard")<ApprovalBoard, {
  /** This node's name, as its posts carry it. */
  readonly node: string
  /** Posts a request this node holds. */
  readonly post: (held: PendingApproval) => Effect.Effect<void, BoardSilent>
  /** The decision made on it elsewhere, once there is one. */
  readonly decisionOf: (id: string) => Effect.Effect<Option.Option<BoardDecision>, BoardSilent>
  /** Takes it down: decided, or its wait ran out. */
  readonly remove: (id: string) => Effect.Effect<void, BoardSilent>
  /** Every node's requests still waiting, each with its node. */
  readonly waiting: Effect.Effect<ReadonlyArray<PendingApproval>, BoardSilent>
  /**
   * From now, what completes when another node says it decided one of this node's requests (its
   * runner RPC): the holding node looks at once instead of at its next look.
   */
  readonly nextNudge: Effect.Effect<Effect.Effect<void>>
  /** Notes where its card was posted (after `post`): a press decides it only from there. */
  readonly placeCard: (id: string, card: CardPlace) => Effect.Effect<void, BoardSilent>
  /**
   * Decides a request another node holds; none when none waits under that id — or, with `card`,
   * when its card is not that one (a press decides only the request on the card pressed).
   */
  readonly decide: (id: string, decided: BoardDecision, card?: CardPlace) => Effect.Effect<Option.Option<PendingApproval>, BoardSilent>
}>() {}
