import { Clock, Effect, Either, Schema } from "effect"
import type { KnowledgePush } from "../../contract/knowledge.js"
import { openTaints, taintLine } from "../../contract/taint.js"
import { knowledgePush, type PushOutcome } from "../../knowledge/push.js"
import { RunLog } from "../../run/RunLog.js"
import type { ActionAnswer, BoxCaller } from "./actionTypes.js"

const Body = Schema.parseJson(Schema.Struct({ connection: Schema.optional(Schema.String) }))

/**
 * knowledge_push: lands the run's branch of a gated repo on the canonical default branch, after
 * the host's checks (fast-forward, protected paths, size). The worker and run come from the token,
 * so a box can only ever push its own run's clone. The result goes back to the tool and into run.json.
 */
export const knowledgePushAction = (caller: BoxCaller, body: string) =>
  Effect.gen(function*() {
    const decoded = Schema.decodeUnknownEither(Body)(body.trim() === "" ? "{}" : body)
    if (Either.isLeft(decoded)) return { status: 400, body: { ok: false, error: `the body is {"connection"?: "<gated repo name>"}` } } satisfies ActionAnswer
    const read = yield* Effect.either((yield* RunLog).readForDecision(caller.worker, caller.runId))
    // Whether the run is tainted must be known before its work lands anywhere.
    if (Either.isLeft(read)) return { status: 503, body: { ok: false, error: read.left.message } } satisfies ActionAnswer
    const run = read.right
    const taint = run ? openTaints(run).at(-1) : undefined
    const outcome: PushOutcome = taint
      ? {
        ok: false, connection: decoded.right.connection ?? null, head: null, kind: "tainted",
        reason: `this run is tainted (${taintLine(taint)}): its work stays quarantined on refs/quarantine/run-${caller.runId} when the run ends, ` +
          `and lands only if a person decides so: roster runs untaint ${caller.runId} --reason "…"`
      }
      : yield* knowledgePush(caller.worker, caller.runId, decoded.right.connection)
    const at = new Date(yield* Clock.currentTimeMillis).toISOString()
    const entry: KnowledgePush = outcome.ok
      ? { connection: outcome.connection, at, ok: true, head: outcome.head, landed_ref: outcome.landed_ref }
      : { connection: outcome.connection ?? decoded.right.connection ?? "", at, ok: false, head: outcome.head, reason: outcome.reason }
    yield* recordPush(caller, entry)
    if (outcome.ok) {
      yield* Effect.logInfo(`gateway: run ${caller.runId} of ${caller.worker} landed ${outcome.head.slice(0, 12)} on ${outcome.connection} ${outcome.landed_ref}`)
      return { status: 200, body: { ok: true, connection: outcome.connection, head: outcome.head, landed_ref: outcome.landed_ref, already: outcome.already } } satisfies ActionAnswer
    }
    yield* Effect.logInfo(`gateway: run ${caller.runId} of ${caller.worker}: knowledge_push refused: ${outcome.reason}`)
    return { status: outcome.kind === "tainted" ? 403 : outcome.kind === "refused" ? 409 : 500, body: { ok: false, error: outcome.reason, head: outcome.head } } satisfies ActionAnswer
  })

const recordPush = (caller: BoxCaller, entry: KnowledgePush) =>
  Effect.gen(function*() {
    yield* (yield* RunLog).append(caller.worker, caller.runId, { kind: "knowledge_push", push: entry })
  }).pipe(Effect.catchAll((e) => Effect.logWarning(`gateway: run ${caller.runId}: its knowledge_push could not be noted: ${e.message}`)))
