import { Effect } from "effect"
import { OrgConfig } from "../../config/OrgConfig.js"
import type { Policy } from "../../config/policy.js"
import type { Caller } from "../base/identify.js"
import { Refusal } from "../base/refusal.js"
import { refuseTraced } from "../base/refuseTraced.js"
import type { RequestTrace } from "../base/supervise.js"
import type { Asked } from "../policy/asked.js"
import { decide } from "../policy/decide.js"
import { type Settled, type Verdict } from "../policy/verdict.js"
import { holdFor } from "./approve.js"
import { Gateway } from "./Gateway.js"

/**
 * The policy in force and its verdict on what the caller asks: org.toml as last decoded (its policy
 * compiled then), decided by the one function. An org.toml that does not decode allows nothing.
 * Untraced: it runs on every request the gateway handles, and a traced step (a span and a stack
 * capture per call) measured 13–26 µs against 1–3 µs untraced (docs/PERFORMANCE.md).
 */
export const decideNow = Effect.fnUntraced(function*(caller: Caller, asked: Asked) {
  const policy = yield* (yield* OrgConfig).policy.pipe(
    Effect.mapError(() =>
      new Refusal(403, "org.toml is invalid: nothing is allowed until it is fixed (roster doctor names the error)", {
        why: "config_invalid", subject: caller.subject, ...(asked._tag === "Connect" || asked._tag === "Request" ? { host: asked.host, port: asked.port } : {})
      })
    )
  )
  return { policy, verdict: decide(policy, caller, asked) }
})

/** What a listener needs to carry a verdict through: the body, read when the decision asks for it, and the request's end. */
export interface Settling {
  readonly caller: Caller
  /** The request's body, read whole (at most `limit` bytes: past it, 413). */
  readonly readBody: (limit: number) => Effect.Effect<Buffer, Refusal>
  /** Completes when the box ends its side of the connection: a held request has no one to answer then. */
  readonly closed: Effect.Effect<void>
}

/**
 * A verdict carried to the point a listener acts on it: a body the decision asked for read and the request
 * decided again with it (by the same policy), a hold decided by a person (who approved it is said), a
 * refusal failed with. What is left is a tunnel, an interception or a forward.
 */
export const settle = (policy: Policy, asked: Asked, first: Verdict, io: Settling) =>
  Effect.gen(function*() {
    let verdict = first
    if (verdict._tag === "ReadBody" && asked._tag === "Request") {
      const raw = yield* io.readBody(verdict.limit)
      verdict = decide(policy, io.caller, { ...asked, body: { raw } })
    }
    switch (verdict._tag) {
      case "Refuse":
        return yield* Effect.fail(verdict.refusal)
      case "ReadBody":
        return yield* Effect.dieMessage("the decision asked for the body it was given")
      case "Hold": {
        const approvedBy = yield* holdFor(io.caller, verdict, io.closed)
        return { settled: verdict.then as Settled, approvedBy: approvedBy as string | undefined }
      }
      default:
        return { settled: verdict as Settled, approvedBy: undefined as string | undefined }
    }
  })

/**
 * A listener's one place for refusals: a request handler that fails with a Refusal gets it answered
 * (`answer`: on a socket or as an HTTP response) after the caller's run is tainted, then audited.
 */
export const answeringRefusals = (trace: RequestTrace, answer: (r: Refusal) => void) =>
<A, E, R>(handler: Effect.Effect<A, E | Refusal, R>) =>
  handler.pipe(
    Effect.catchIf((e): e is Refusal => e instanceof Refusal, (r) =>
      Effect.flatMap(Gateway, (self) => refuseTraced(self.taints, trace, answer)(r, trace.caller)))
  )

/** An audit line's note for a request a person let through: who approved it, then what else the line says. */
export const approvedNote = (approvedBy: string, note?: string) => [`approved by ${approvedBy}`, note].filter(Boolean).join("; ")
