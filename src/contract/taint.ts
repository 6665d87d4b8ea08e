import { Schema } from "effect"

/**
 * Why a run is tainted: it asked for egress no rule allows, sent roster's placeholder upstream,
 * ran into a spend budget, or sent a request for one host inside another's tunnel (misdirected). A tainted run's gated-repo work stays quarantined until a person
 * lands it (`roster runs untaint`).
 */
export const TaintReason = Schema.Literal("egress_refused", "sentinel_upstream", "budget", "server_tools", "inherited", "misdirected", "unreadable")
export type TaintReason = typeof TaintReason.Type

export const Taint = Schema.Struct({
  reason: TaintReason,
  host: Schema.NullOr(Schema.String),
  time: Schema.String,
  /** In words, never a value: the refusal's kind, where the sentinel was, which budget. */
  detail: Schema.optional(Schema.String),
  /**
   * "inherited": the tainted run this one carries on from (the run that queued it, the run it
   * continues). Its own decision: untainting that run does not untaint this one.
   */
  inherited_from: Schema.optional(Schema.String)
})
export type Taint = typeof Taint.Type

/** What a person's `roster runs untaint` did: why, when, and what of the run's quarantined work it landed. */
export const Untaint = Schema.Struct({
  reason: Schema.String,
  at: Schema.String,
  /** How many of the run's taints the person saw and cleared; any after them taint the run again. */
  cleared: Schema.Number,
  landed: Schema.Array(Schema.Struct({
    connection: Schema.String,
    ok: Schema.Boolean,
    ref: Schema.optional(Schema.String),
    head: Schema.optional(Schema.String),
    detail: Schema.String
  }))
})
export type Untaint = typeof Untaint.Type

type Tainting = { readonly tainted?: ReadonlyArray<Taint> | undefined; readonly untainted?: Untaint | undefined }

/** The taints a person has not cleared: those after the ones an untaint saw (clock-free, by order). */
export const openTaints = (r: Tainting): ReadonlyArray<Taint> => (r.tainted ?? []).slice(r.untainted?.cleared ?? 0)

/** Tainted and not cleared by a person since: a taint after an untaint taints the run again. */
export const isTainted = (r: Tainting) => openTaints(r).length > 0

/** One taint, for people and the briefing. */
export const taintLine = (t: Taint) =>
  `${t.reason}${t.inherited_from ? ` from run ${t.inherited_from}` : ""}${t.host ? ` (${t.host})` : ""}${t.detail ? `: ${t.detail}` : ""} at ${t.time}`
