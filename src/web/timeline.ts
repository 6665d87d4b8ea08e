import { Effect } from "effect"
import { runFiles } from "../contract/runFiles.js"
import { foldFileLines } from "../fs/lines.js"
import { auditOf } from "../run/query.js"
import type { RunRecord } from "../run/RunLog.js"

/** One thing that happened in a run, in the order it happened: pi's events, the gateway's requests, message_user. */
export type Entry =
  | { readonly kind: "turn"; readonly at: number }
  | { readonly kind: "prompt"; readonly at: number; readonly text: string }
  | {
    readonly kind: "assistant"
    readonly at: number
    readonly text: string
    readonly calls: ReadonlyArray<{ readonly name: string; readonly args: string }>
    readonly error: string | null
  }
  | { readonly kind: "tool"; readonly at: number; readonly name: string; readonly output: string; readonly isError: boolean }
  | {
    readonly kind: "request"
    readonly at: number
    readonly method: string
    readonly target: string
    readonly status: number
    readonly injected: boolean
    readonly bytes: number
    readonly ms: number
    readonly note: string | null
  }
  | { readonly kind: "message"; readonly at: number; readonly text: string }

/** The most entries a timeline shows; the rest are in the raw transcript. */
export const MAX_ENTRIES = 2_000

const record = (v: unknown): Record<string, unknown> => (typeof v === "object" && v !== null && !Array.isArray(v) ? v as Record<string, unknown> : {})
const str = (v: unknown) => (typeof v === "string" ? v : "")
const parts = (content: unknown): Array<Record<string, unknown>> => (Array.isArray(content) ? content.map(record) : [])
const textParts = (content: unknown) => parts(content).filter((p) => p.type === "text").map((p) => str(p.text)).join("")

interface Fold {
  readonly entries: Array<Entry>
  at: number
  more: number
}

/** One line of pi's output as a timeline entry (or none), timed by the last timestamp pi gave. */
const step = (f: Fold, line: string): Fold => {
  if (!line.startsWith("{")) return f
  let e: Record<string, unknown>
  try {
    e = record(JSON.parse(line))
  } catch {
    return f
  }
  const m = record(e.message)
  if (typeof m.timestamp === "number" && Number.isFinite(m.timestamp)) f.at = Math.max(f.at, m.timestamp)
  const push = (entry: Entry) => (f.entries.length < MAX_ENTRIES ? f.entries.push(entry) : f.more++)
  if (e.type === "turn_start") push({ kind: "turn", at: f.at })
  else if (e.type === "message_end" && m.role === "user") push({ kind: "prompt", at: f.at, text: textParts(m.content) })
  else if (e.type === "message_end" && m.role === "assistant") {
    const calls = parts(m.content).filter((p) => p.type === "toolCall").map((p) => ({ name: str(p.name), args: JSON.stringify(p.arguments ?? {}) }))
    push({ kind: "assistant", at: f.at, text: textParts(m.content), calls, error: m.stopReason === "error" ? str(m.errorMessage) || "error" : null })
  } else if (e.type === "tool_execution_end") {
    push({ kind: "tool", at: f.at, name: str(e.toolName), output: textParts(record(e.result).content), isError: e.isError === true })
  }
  return f
}

/**
 * A run's timeline: pi's turns, prompts, answers and tool calls with their output, the gateway's
 * requests and the messages the box sent its person, interleaved by time. The transcript is read
 * line by line, whatever its size.
 */
export const timelineOf = (run: RunRecord, runDir: string) =>
  Effect.gen(function*() {
    const files = runFiles(runDir)
    const started = Date.parse(run.started_at)
    const fold = yield* foldFileLines(files.transcript, { entries: [], at: started, more: 0 } as Fold, step).pipe(
      Effect.orElseSucceed((): Fold => ({ entries: [], at: started, more: 0 }))
    )
    const requests: Array<Entry> = (yield* auditOf(run.run_id, run.started_at)).map((r) => ({
      kind: "request",
      // The audit line is written when the request ends: placed at its start.
      at: (Date.parse(r.time) || started) - r.duration_ms,
      method: r.method,
      target: `${r.host}:${r.port}${r.path}`,
      status: r.status,
      injected: r.injected,
      bytes: r.bytes_up + r.bytes_down,
      ms: r.duration_ms,
      note: r.note ?? null
    }))
    const messages = yield* foldFileLines(files.messages, [] as Array<Entry>, (acc, line) => {
      try {
        const m = record(JSON.parse(line))
        if (acc.length < MAX_ENTRIES) acc.push({ kind: "message", at: Date.parse(str(m.time)) || started, text: str(m.text) })
      } catch {
        // a torn line
      }
      return acc
    }).pipe(Effect.orElseSucceed((): Array<Entry> => []))
    // pi's own order is kept: a stable sort by time only moves requests and messages in between.
    const entries = [...fold.entries, ...requests, ...messages].map((e, i) => ({ e, i })).sort((a, b) => a.e.at - b.e.at || a.i - b.i).map((x) => x.e)
    return { entries, more: fold.more }
  })
