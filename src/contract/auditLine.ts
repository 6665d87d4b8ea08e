import { Option, Schema } from "effect"

/**
 * One line of the gateway's audit log (state/audit/<day>.jsonl) as the web, `runs show` and the
 * usage reports read it: when, who asked for what, how it was answered, whether a credential was
 * injected. A line that is not this (a torn last line while the daemon writes) is skipped.
 */
export const AuditLine = Schema.Struct({
  time: Schema.String,
  run_id: Schema.NullOr(Schema.String),
  subject: Schema.String,
  host: Schema.String,
  port: Schema.Number,
  method: Schema.String,
  path: Schema.String,
  status: Schema.Number,
  injected: Schema.Boolean,
  bytes_up: Schema.Number,
  bytes_down: Schema.Number,
  duration_ms: Schema.Number,
  note: Schema.optional(Schema.String),
  sentinel_unsubstituted: Schema.optional(Schema.Array(Schema.String)),
  why: Schema.optional(Schema.String),
  decided_by: Schema.optional(Schema.String)
})
export type AuditLine = typeof AuditLine.Type

const decodeLine = Schema.decodeUnknownOption(Schema.parseJson(AuditLine))

/** A line of the audit log, if it is one. */
export const readAuditLine = (line: string): AuditLine | undefined => Option.getOrUndefined(decodeLine(line))
