import { Schema } from "effect"

/** One node of the fleet as `roster server status` shows it. */
export const FleetNodeView = Schema.Struct({
  name: Schema.String,
  host: Schema.String,
  pid: Schema.Number,
  version: Schema.String,
  /** up: heartbeating; lost: silent past [cluster] node_timeout_s; left: stopped cleanly. */
  state: Schema.Literal("up", "lost", "left"),
  /** Seconds since its last heartbeat, on the database's clock. */
  heartbeat_age_s: Schema.Number,
  boxes: Schema.Number,
  concurrency: Schema.Number,
  /** The machine's one-minute load average. */
  load: Schema.Number,
  /** Its clock minus the database's, at its last heartbeat. */
  skew_ms: Schema.Number,
  /** Once lost: the node that fenced it (its attempts can land nothing; its tasks re-queued or failed). */
  fenced_by: Schema.optional(Schema.NullOr(Schema.String)),
  /** Where its runner RPC is reached ([cluster] advertise, else listen); null: it has none. */
  advertise: Schema.optional(Schema.NullOr(Schema.String)),
  /** A live node's runner RPC as this node found it just now: answered (in ms), or why not. */
  rpc: Schema.optional(Schema.Struct({
    ok: Schema.Boolean,
    ms: Schema.optional(Schema.Number),
    detail: Schema.optional(Schema.String)
  })),
  /** Config files whose content differs from this node's (org.toml compared without node and port). */
  config_differs: Schema.Array(Schema.String)
})
export type FleetNodeView = typeof FleetNodeView.Type

/** This daemon's place in its fleet: its name, the database, and every node the fleet has known. */
export const FleetStatus = Schema.Struct({
  node: Schema.String,
  /** host:port/database, never the password. */
  database: Schema.String,
  /** false while the database does not answer: the node retries at every heartbeat. */
  reachable: Schema.Boolean,
  detail: Schema.NullOr(Schema.String),
  /**
   * Set while no heartbeat has landed for `[cluster] node_timeout_s` less two beats: the node has
   * stopped its boxes and takes no work until the database answers (the sentence says so).
   */
  cut_off: Schema.optional(Schema.String),
  schema: Schema.Number,
  nodes: Schema.Array(FleetNodeView)
})
export type FleetStatus = typeof FleetStatus.Type

/** A live box on a node of the fleet, as that node's runner RPC tells it (`roster web`'s Now page on another node). */
export const FleetBox = Schema.Struct({
  run_id: Schema.String,
  worker: Schema.String,
  kind: Schema.String,
  task_id: Schema.NullOr(Schema.String),
  age_s: Schema.Number,
  remaining_s: Schema.NullOr(Schema.Number),
  cpu_percent: Schema.optional(Schema.Number),
  memory_bytes: Schema.optional(Schema.Number)
})
export type FleetBox = typeof FleetBox.Type

/** Another node's live boxes, or why they could not be had (no runner RPC, no answer). */
export const NodeBoxes = Schema.Struct({
  node: Schema.String,
  boxes: Schema.optional(Schema.Array(FleetBox)),
  detail: Schema.optional(Schema.String)
})
export type NodeBoxes = typeof NodeBoxes.Type
