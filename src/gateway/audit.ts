import { Clock, Effect } from "effect"
import * as fsp from "node:fs/promises"
import * as nodePath from "node:path"
import { Paths, layout } from "../config/Paths.js"

export interface AuditRecord {
  readonly run_id: string | null
  readonly subject: string
  readonly host: string
  readonly port: number
  readonly method: string
  /** Without the query: a query can carry secrets the audit log must not keep. */
  readonly path: string
  readonly status: number
  readonly injected: boolean
  readonly bytes_up: number
  readonly bytes_down: number
  readonly duration_ms: number
  readonly note?: string
}

/** One JSONL line per request under state/audit/<day>.jsonl. Never fails the request it records. */
export const audit = (record: AuditRecord) =>
  Effect.gen(function*() {
    const dir = layout(yield* Paths).auditDir
    const now = new Date(yield* Clock.currentTimeMillis)
    const line = `${JSON.stringify({ time: now.toISOString(), ...record })}\n`
    yield* Effect.tryPromise(async () => {
      await fsp.mkdir(dir, { recursive: true, mode: 0o700 })
      await fsp.appendFile(nodePath.join(dir, `${now.toISOString().slice(0, 10)}.jsonl`), line, { mode: 0o600 })
    })
  }).pipe(Effect.ignore)
