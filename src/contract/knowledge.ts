import { Schema } from "effect"

/** What the run's knowledge ended as, per checkout, in run.json. */
export const KnowledgeResult = Schema.Struct({
  connection: Schema.String,
  base: Schema.String,
  /** The run's last state (its commits and, if any, a commit of its uncommitted changes); null when it could not be read. */
  head: Schema.NullOr(Schema.String),
  quarantined_ref: Schema.optional(Schema.String),
  landed_ref: Schema.optional(Schema.String),
  unchanged: Schema.optional(Schema.Boolean),
  /** What could not be parked, and that the clone is kept. */
  error: Schema.optional(Schema.String),
  /** The run's clone on the host, kept because not all of its work could be parked. */
  kept: Schema.optional(Schema.String)
})
export type KnowledgeResult = typeof KnowledgeResult.Type

/** One knowledge_push, in run.json: what it tried, and how it ended. */
export const KnowledgePush = Schema.Struct({
  connection: Schema.String,
  at: Schema.String,
  ok: Schema.Boolean,
  head: Schema.NullOr(Schema.String),
  landed_ref: Schema.optional(Schema.String),
  reason: Schema.optional(Schema.String)
})
export type KnowledgePush = typeof KnowledgePush.Type

/** One line on how a run's repo ended, for the log and `runs show`. */
export const knowledgeLine = (r: KnowledgeResult) =>
  r.error !== undefined
    ? `${r.connection}: ${r.quarantined_ref ? `kept on ${r.quarantined_ref}, but ` : r.landed_ref ? `landed, but ` : ""}not all parked (${r.error})`
    : r.quarantined_ref !== undefined
    ? `${r.connection}: unlanded work kept on ${r.quarantined_ref}`
    : r.landed_ref !== undefined
    ? `${r.connection}: landed on ${r.landed_ref}`
    : `${r.connection}: unchanged`
