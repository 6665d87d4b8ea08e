import { Context, type Effect, type Stream } from "effect"
import type { FleetStatus, NodeBoxes } from "../contract/fleet.js"

/**
 * This daemon as a node of its fleet (`[cluster]` in org.toml): registered in the fleet's
 * database, heartbeating while it runs, marked left when it stops. Absent from a daemon that is
 * one machine on its own.
 */
export class FleetMember extends Context.Tag("roster/FleetMember")<FleetMember, {
  readonly node: string
  /** The fleet as the database sees it now; when it does not answer, the last view with why. */
  readonly status: Effect.Effect<FleetStatus>
  /** The id of every task that changes anywhere in the fleet, as the database announces it. */
  readonly changes: Stream.Stream<string>
  /**
   * True once a heartbeat found this node fenced: the fleet declared it lost while it was silent
   * (frozen, cut off) and gave its tasks to other nodes. Nothing it runs can land; it claims
   * nothing until it has killed its boxes and joined again.
   */
  readonly fenced: Effect.Effect<boolean>
  /**
   * True while no heartbeat has landed for `[cluster] node_timeout_s` less two beats (the
   * database down, or this node cut off from it): the node stops its boxes, its gateway refuses
   * them, and it claims nothing — before the fleet could fence it and re-run its tasks — until a
   * beat lands again.
   */
  readonly cutOff: Effect.Effect<boolean>
  /**
   * True while no heartbeat has landed for as long as would cut the node off, whatever the reason —
   * this process frozen or starved among them, which `cutOff` does not count: its lease may have
   * lapsed unseen, so it claims nothing until a beat says whether it still holds it.
   */
  readonly leaseInDoubt: Effect.Effect<boolean>
  /**
   * Takes `worker`'s box row fleet-wide for a box that is not a task's (a chat session's, `key`):
   * false while another live box of the worker holds it or its task runs on any node.
   */
  readonly takeBox: (worker: string, key: string) => Effect.Effect<boolean, unknown>
  /** Gives back the row `key` took (tried again in the background while the database does not answer). */
  readonly giveBox: (worker: string, key: string) => Effect.Effect<void>
  /** Whether a live box row of `worker` exists (a claim made as it was taken gives its task back). */
  readonly boxElsewhere: (worker: string) => Effect.Effect<boolean>
  /** Joins the fleet again as a new instance of this node (after its boxes of the fenced one are gone). */
  readonly rejoin: Effect.Effect<void>
  /**
   * Tells `node` that one of the requests it holds was decided on the board, so it applies it at
   * once rather than at its next look (its runner RPC; nothing when it has none). Never fails: a
   * node that does not answer still finds the decision at its next look, and that is logged.
   */
  readonly nudgeApprovals: (node: string) => Effect.Effect<void>
  /** Every other live node's boxes, asked of each at once (its runner RPC), or why not. */
  readonly elsewhere: Effect.Effect<ReadonlyArray<NodeBoxes>>
}>() {}
