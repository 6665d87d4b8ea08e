import { Deferred, Effect, Option } from "effect"
import * as crypto from "node:crypto"
import type { ApprovalDecision, PendingApproval } from "../../contract/approval.js"

export type { ApprovalDecision, PendingApproval }

export interface Decided {
  readonly decision: ApprovalDecision
  /** Who decided (an OS user from the CLI, the web's person), for the audit line. */
  readonly by: string
}

export type Ask = Omit<PendingApproval, "id" | "asked_at" | "expires_at">

/**
 * The gateway's held requests and what each run was let through for good. In memory: a held
 * request is a connection that waits, and both end with the daemon.
 */
export const makeApprovals = () => {
  const pending = new Map<string, { readonly view: PendingApproval; readonly answer: Deferred.Deferred<Decided> }>()
  const forRun = new Map<string, Set<string>>()
  const key = (host: string, port: number) => `${host}:${port}`
  return {
    /** Holds `ask` until someone decides or `waitMs` pass (None): the pending entry goes either way. */
    ask: (ask: Ask, now: number, waitMs: number) =>
      Effect.gen(function*() {
        const id = `ap-${crypto.randomBytes(4).toString("hex")}`
        const answer = yield* Deferred.make<Decided>()
        const view: PendingApproval = { ...ask, id, asked_at: new Date(now).toISOString(), expires_at: new Date(now + waitMs).toISOString() }
        pending.set(id, { view, answer })
        return yield* Deferred.await(answer).pipe(
          Effect.timeoutOption(waitMs),
          Effect.ensuring(Effect.sync(() => pending.delete(id)))
        )
      }),
    list: Effect.sync(() => [...pending.values()].map((p) => p.view).sort((a, b) => a.asked_at.localeCompare(b.asked_at))),
    /** The held request, once found; its decision reaches its waiting connection. */
    find: (id: string) => Effect.sync(() => Option.fromNullable(pending.get(id)?.view)),
    decide: (id: string, decided: Decided) =>
      Effect.gen(function*() {
        const held = pending.get(id)
        if (!held) return Option.none<PendingApproval>()
        if (decided.decision === "run") {
          const set = forRun.get(held.view.run_id) ?? new Set<string>()
          set.add(key(held.view.host, held.view.port))
          forRun.set(held.view.run_id, set)
        }
        yield* Deferred.succeed(held.answer, decided)
        return Option.some(held.view)
      }),
    /** This run was let through to host:port for the rest of it (`--run`). */
    allowedForRun: (runId: string | null, host: string, port: number) => runId !== null && (forRun.get(runId)?.has(key(host, port)) ?? false)
  }
}
export type Approvals = ReturnType<typeof makeApprovals>
