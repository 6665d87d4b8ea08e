import { Clock, Context, Effect, FiberSet, Layer, Ref, Schedule } from "effect"
import { Paths, layout } from "../../config/Paths.js"
import { makeDayFiles } from "../../fs/dayFiles.js"
import { AuditIndex } from "../../run/AuditIndex.js"
import { logDefects } from "../../report/defects.js"

/** One line of the gateway's audit log: who asked for what, how it was answered, whether a credential was injected. */
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
  /** Where the request left the gateway still carrying a sentinel ("header:x-other", "query", "body"). */
  readonly sentinel_unsubstituted?: ReadonlyArray<string>
  /** Why a refused request was refused (the code its refusal carries: request_rule, ambiguous, no_rule, …). */
  readonly why?: string
  /** The entry and rule that decided it (`[[grant]] "github" rule 2 (…)`), where an entry with rules did. */
  readonly decided_by?: string
}

/** How often a failing audit log is reported: once a minute, not once a request. */
const WARN_EVERY_MS = 60_000

/**
 * One JSONL line per gateway request under state/audit/<day>.jsonl. A write never fails the
 * request it records, but a failing audit log is never silent: it is logged once a minute.
 * The day's file stays open for appending (one write per line, no open and close per request:
 * measured, the largest per-request file cost); it is closed when the day turns or the layer
 * closes, and a line is on disk as soon as its write returns — `runs show` right after a run
 * sees every request.
 */
export class Audit extends Context.Tag("roster/Audit")<Audit, {
  readonly write: (record: AuditRecord) => Effect.Effect<void>
  /**
   * `write` for a handler that is not a fiber (the gateway's common request): the line joins the
   * day's queue at once; a failure is reported as `write` reports it.
   */
  readonly submit: (record: AuditRecord) => void
}>() {
  /** The audit log on this machine's disk (a machine on its own: `runs show` reads it from the run's days). */
  static readonly layer = Layer.scoped(Audit, Effect.suspend(() => makeAudit(() => undefined)))

  /** The audit log, and where each run's lines begin said to an {@link AuditIndex} (a fleet's table) every few seconds. */
  static readonly layerIndexed = Layer.scoped(Audit, Effect.gen(function*() {
    const starts = yield* runStarts(yield* AuditIndex, (yield* Paths).fleet?.node ?? "")
    return yield* makeAudit(starts.note)
  }))

  /** Keeps records in memory, for tests that read what the gateway recorded. */
  static readonly layerMemory = (records: Array<AuditRecord>) =>
    Layer.succeed(Audit, { write: (record) => Effect.sync(() => void records.push(record)), submit: (record) => void records.push(record) })
}

/**
 * Where each run's lines begin in each day's file, gathered as they are written and handed to the
 * index every 5 s (and as the log closes): one row a run and day, not a database write a request.
 * What the index did not take is kept for the next try.
 */
const runStarts = (index: Context.Tag.Service<AuditIndex>, node: string) =>
  Effect.gen(function*() {
    let gathered = new Map<string, { run_id: string; day: string; offset: number; requests: number }>()
    const flush = Effect.suspend(() => {
      if (gathered.size === 0) return Effect.void
      const taken = gathered
      gathered = new Map()
      return index.put([...taken.values()].map((s) => ({ ...s, node }))).pipe(
        Effect.catchAll(() => Effect.sync(() => {
          for (const [key, s] of taken) {
            const now = gathered.get(key)
            gathered.set(key, now ? { ...s, offset: Math.min(s.offset, now.offset), requests: s.requests + now.requests } : s)
          }
        }))
      )
    })
    yield* Effect.forkScoped(Effect.interruptible(flush.pipe(
      logDefects("gateway: unexpected failure noting audit offsets in the run index (tried again in 5 s)"),
      Effect.repeat(Schedule.spaced("5 seconds"))
    )))
    // At close, what the index still did not take is said: those runs' audit pages read their day files whole.
    yield* Effect.addFinalizer(() =>
      flush.pipe(
        Effect.timeout("2 seconds"),
        // A flush that timed out leaves its rows in `gathered`: said just below, not lost silently.
        Effect.catchAll(() => Effect.void),
        Effect.zipRight(Effect.suspend(() =>
          gathered.size === 0
            ? Effect.void
            : Effect.logWarning(`gateway: ${gathered.size} run-day audit offsets were not put in the run index before the gateway closed; those runs' pages read their day files whole`)
        ))
      ))
    return {
      note: (runId: string, day: string, offset: number) => {
        const key = `${runId} ${day}`
        const known = gathered.get(key)
        if (known) known.requests++
        else gathered.set(key, { run_id: runId, day, offset, requests: 1 })
      }
    }
  })

const makeAudit = (noted: (runId: string, day: string, offset: number) => void) =>
  Effect.gen(function*() {
    // The day files take the file services once, here: their writes need nothing of a caller.
    const dir = layout(yield* Paths).auditDir
    const days = yield* makeDayFiles(dir)
    const lastWarned = yield* Ref.make(Number.NEGATIVE_INFINITY)
    const warn = (detail: string) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const due = yield* Ref.modify(lastWarned, (at) => (now - at >= WARN_EVERY_MS ? [true, now] : [false, at]))
        if (due) yield* Effect.logWarning(`the gateway's audit log cannot be written (${dir}): ${detail} — requests go on unrecorded until it can`)
      })
    const written = (record: AuditRecord, day: string) => (offset: number) => {
      if (record.run_id !== null && offset >= 0) noted(record.run_id, day, offset)
    }
    const lineOf = (record: AuditRecord, millis: number) => {
      const time = new Date(millis).toISOString()
      return { line: `${JSON.stringify({ time, ...record })}\n`, day: time.slice(0, 10) }
    }
    const writeLine = (record: AuditRecord, { day, line }: { readonly day: string; readonly line: string }) =>
      days.write(day, line).pipe(Effect.tap(written(record, day)), Effect.catchAll((e) => warn(e.message)))
    const write = (record: AuditRecord) => Effect.flatMap(Clock.currentTimeMillis, (millis) => writeLine(record, lineOf(record, millis)))
    // A submit's file work runs as a fiber of the log's scope: closing the gateway interrupts what is left.
    const run = yield* FiberSet.makeRuntime<never>()
    const clock = yield* Effect.clock
    return Audit.of({
      write,
      submit: (record) => {
        const made = lineOf(record, clock.unsafeCurrentTimeMillis())
        const { day, line } = made
        const current = days.current(day)
        // The day's first line opens its file, as `write` does.
        if (!current) return void run(writeLine(record, made))
        current.push(line).then(written(record, day), (e: unknown) => void run(warn(e instanceof Error ? e.message : String(e))))
      }
    })
  })
