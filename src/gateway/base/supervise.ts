import { Cause, Clock, Effect } from "effect"
import { Audit, type AuditRecord } from "./Audit.js"
import { redactMarks } from "../secrets/sentinelScan.js"
import { logDefects } from "../../report/defects.js"
import type { Caller } from "./identify.js"

/** What is known of a request so far: each handler fills it in, so a failure is still audited with it. */
export interface RequestTrace {
  run_id: string | null
  subject: string
  /** Who is asking, once its token is read: a refusal taints its run. */
  caller?: Caller | undefined
  host: string
  port: number
  method: string
  path: string
  readonly startedAt: number
}

export const newTrace = (method: string, host: string, port: number, path: string) =>
  Effect.map(Clock.currentTimeMillis, (startedAt): RequestTrace => ({ run_id: null, subject: "?", host, port, method, path, startedAt }))

export type TraceFields =
  & Pick<AuditRecord, "status">
  & Partial<Pick<AuditRecord, "injected" | "bytes_up" | "bytes_down" | "note" | "host" | "sentinel_unsubstituted" | "why" | "decided_by">>

/** The audit line of a request from its trace, at `now`. */
export const traceRecord = (trace: RequestTrace, fields: TraceFields, now: number): AuditRecord => {
  const { startedAt: _, caller: _caller, ...where } = trace
  return { injected: false, bytes_up: 0, bytes_down: 0, ...where, path: redactMarks(where.path), ...fields, duration_ms: now - trace.startedAt }
}

/** Audits one request from its trace: the duration comes from the Clock. */
export const auditTrace = (trace: RequestTrace, fields: TraceFields) =>
  Effect.gen(function*() {
    const audit = yield* Audit
    yield* audit.write(traceRecord(trace, fields, yield* Clock.currentTimeMillis))
  })

/**
 * A request handler that cannot vanish: an unexpected failure or defect is logged with the
 * request's run and host, the client gets a 500 (or its connection closed when the answer had
 * begun), and the audit log still gets a record with status 500. Interruption (the daemon
 * stopping) is not a failure.
 */
export const supervised = <R>(trace: RequestTrace, handler: Effect.Effect<void, never, R>, fail: () => void) =>
  handler.pipe(
    Effect.catchAllCause((cause) =>
      Cause.isInterruptedOnly(cause) ? Effect.void : Effect.gen(function*() {
        yield* Effect.logError(
          `gateway: unexpected failure on ${trace.method} ${trace.host}:${trace.port}${trace.path} for run ${trace.run_id ?? "-"} (${trace.subject})`,
          cause
        )
        yield* Effect.sync(fail)
        yield* auditTrace(trace, { status: 500, note: "internal error in the gateway (see its log)" })
      })
    )
  )

/**
 * Background work of the gateway, past the request that started it (a box killed, a taint or a
 * usage note written, a grant decided again): its own failures it handles, and a defect in it
 * (a bug) is logged here, never lost with its fiber.
 */
export const inBackground = logDefects("gateway: unexpected failure in background work (the gateway goes on)")
