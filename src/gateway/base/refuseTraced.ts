import { Effect } from "effect"
import type { Caller } from "./identify.js"
import { placed, type Refusal } from "./refusal.js"
import { auditTrace, type RequestTrace } from "./supervise.js"
import { taintOnRefusal, type TaintMemo } from "./taint.js"

/**
 * A refusal as every handler gives it: the caller's run tainted first (the taint is written
 * before the box hears the answer, so nothing it does next can outrun it), then the answer
 * (`answer`: on a socket or as an HTTP response), then the audit line.
 */
export const refuseTraced = (taints: TaintMemo, trace: RequestTrace, answer: (r: Refusal) => void) => (r: Refusal, caller?: Caller) =>
  taintOnRefusal(taints, caller, placed(r, trace)).pipe(
    Effect.zipRight(Effect.sync(() => answer(placed(r, trace)))),
    Effect.zipRight(auditTrace(trace, { status: r.status, note: r.reason, why: r.detail.why }))
  )
