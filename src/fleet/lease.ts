import { Duration } from "effect"
import type { ClusterSection } from "../config/cluster.js"

/** How often a node beats: six beats in a timeout, at most every 5 s, so one lost packet never loses a node. */
export const beatEvery = (cluster: ClusterSection) => Duration.seconds(Math.max(1, Math.min(5, cluster.node_timeout_s / 6)))

/**
 * The lease's margin, two heartbeats: a node stops acting this long before its lease can expire,
 * and the fleet waits this long past the timeout before it re-runs a silent node's tasks — so a
 * node cut off from the database has put its boxes down before anything of its runs elsewhere.
 */
export const leaseMarginS = (cluster: ClusterSection) => 2 * Duration.toSeconds(beatEvery(cluster))

/** How long a node may go without a heartbeat that landed before it stops its own boxes. */
export const cutOffAfterMs = (cluster: ClusterSection) => (cluster.node_timeout_s - leaseMarginS(cluster)) * 1000

/** How long a node must have been silent before the fleet fences it and re-queues its tasks. */
export const fenceAfterS = (cluster: ClusterSection) => cluster.node_timeout_s + leaseMarginS(cluster)

/** What the heartbeat knows of this node: the database reachable or not (and why), fenced by the fleet, cut off by itself. */
export interface Health {
  readonly reachable: boolean
  readonly detail: string | null
  readonly fenced: boolean
  /** Since when (this machine's clock, ms) this node has reached the database without a break. */
  readonly since: number
  /** The last heartbeat that landed (ms). */
  readonly lastOk: number
  /** When the last heartbeat attempt ended, landed or not (ms): a long gap before the next is this process frozen, not the database. */
  readonly lastTry: number
  /** This node stopped acting: no heartbeat landed for {@link cutOffAfterMs}. */
  readonly cutOff: boolean
}

export const freshHealth = (now: number): Health => ({ reachable: true, detail: null, fenced: false, since: now, lastOk: now, lastTry: now, cutOff: false })

/**
 * A heartbeat that landed ("ok", "fenced", "lapsed", "taken"): the database answers, so the node acts
 * again — fenced or not, as it said; a lease that lapsed is over as a fenced one is.
 */
export const afterLanded = (h: Health, result: "ok" | "fenced" | "lapsed" | "taken", now: number): Health => ({
  reachable: true,
  detail: null,
  fenced: h.fenced || result === "fenced" || result === "lapsed",
  since: h.reachable ? h.since : now,
  lastOk: now,
  lastTry: now,
  cutOff: false
})

/**
 * A heartbeat that did not land (an error, or no answer within a beat). The node cuts itself off
 * once none has landed for {@link cutOffAfterMs} — unless this process itself was frozen or
 * starved since its last try (a gap of more than two beats between tries): then the database was
 * not given its chance, and the next beat, tried at once, decides.
 */
export const afterMissed = (h: Health, detail: string, now: number, cluster: ClusterSection): Health => {
  const frozen = now - h.lastTry > 2 * Duration.toMillis(beatEvery(cluster)) + 1000
  return {
    ...h,
    reachable: false,
    detail,
    lastTry: now,
    cutOff: h.cutOff || (!frozen && now - h.lastOk >= cutOffAfterMs(cluster))
  }
}

/** What a node cut off from its fleet's database says of itself (its log, `server status`). */
export const CUT_OFF = "cut off from the fleet's database: my boxes are stopped, and I take no work until it answers " +
  "(before my lease could expire, so the fleet can re-run my tasks elsewhere without two boxes of one worker)"
