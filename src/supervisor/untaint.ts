import { Clock, Effect, Schema } from "effect"
import { OrgConfig } from "../config/OrgConfig.js"
import { mountsFor } from "../config/schema.js"
import { isTainted } from "../contract/taint.js"
import { gatedRepos } from "../knowledge/provision.js"
import { type Landing, landQuarantined } from "../knowledge/push.js"
import { RunLog } from "../run/RunLog.js"
import { clearMarks } from "../run/storeMarks.js"

/** An untaint that cannot be done, with why. */
export class UntaintError extends Schema.TaggedError<UntaintError>()("UntaintError", { detail: Schema.String }) {
  override get message() {
    return this.detail
  }
}

/**
 * A person's decision that a tainted run's work may land: recorded with the reason, and each of
 * the run's quarantined refs landed under the checks a knowledge_push meets. A run still live
 * may knowledge_push again; a later taint taints it again.
 */
export const untaintRun = Effect.fn("runs.untaint")(function*(worker: string, runId: string, reason: string) {
  if (reason.trim() === "") return yield* Effect.fail(new UntaintError({ detail: `say why: roster runs untaint ${runId} --reason "…"` }))
  const runLog = yield* RunLog
  // What the untaint clears is counted from every taint: the fleet's must be known.
  const run = yield* runLog.readForDecision(worker, runId).pipe(Effect.mapError((e) => new UntaintError({ detail: e.message })))
  if (!run) return yield* Effect.fail(new UntaintError({ detail: `no run ${runId} — list runs with: roster runs list` }))
  if (!isTainted(run)) return yield* Effect.fail(new UntaintError({ detail: `run ${runId} is not tainted: nothing to decide` }))
  const repos = gatedRepos(mountsFor(yield* (yield* OrgConfig).snapshot, worker))
  const landed: Array<Landing> = []
  for (const k of run.knowledge ?? []) {
    if (k.quarantined_ref === undefined) continue
    const mount = repos.find((m) => m.name === k.connection)
    landed.push(mount
      ? yield* landQuarantined(mount, k.quarantined_ref, runId)
      : { connection: k.connection, ok: false, ref: k.quarantined_ref, detail: `org.toml no longer grants ${worker} a gated repo "${k.connection}"` })
  }
  const at = new Date(yield* Clock.currentTimeMillis).toISOString()
  const cleared = run.tainted?.length ?? 0
  yield* runLog.append(worker, runId, { kind: "untaint", untaint: { reason: reason.trim(), at, cleared, landed } })
  // The stores it marked: runs given them no longer start tainted on its account.
  const unmarked = yield* clearMarks([{ worker }, ...(run.channel !== undefined ? [{ worker, channel: run.channel }] : [])], runId).pipe(
    Effect.catchAll((e) => Effect.logWarning(`run ${runId}: its store marks could not be cleared (${e.message})`).pipe(Effect.as([] as Array<string>)))
  )
  return { run, landed, live: run.finished_at === null, unmarked }
})
