import { Schema } from "effect"

const APPROVAL_ID = /^ap-[0-9a-f]{8}$/
export const isApprovalId = (id: string): boolean => APPROVAL_ID.test(id)
/** A held request's id (`ap-` and 8 hex), the only form the control API's paths take. */
export const ApprovalId = Schema.String.pipe(Schema.filter((s) => isApprovalId(s) || `"${s}" is not a held request's id`))

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
  node: Schema.optional(Schema.String)
})
export type PendingApproval = typeof PendingApproval.Type

/** once: this request; run: this host:port for the rest of the run; always: an [[allow]] in org.toml; deny: the 403 now. */
export const ApprovalDecision = Schema.Literal("once", "run", "always", "deny")
export type ApprovalDecision = typeof ApprovalDecision.Type
