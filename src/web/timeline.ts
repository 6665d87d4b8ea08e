import { Effect, Option, Schema } from "effect"
import { readTimelineEvent } from "../contract/piEvents.js"
import { runFiles } from "../contract/runFiles.js"
import { foldFileLines } from "../fs/lines.js"
import { auditOf } from "../run/query.js"
import type { RunRecord } from "../run/RunLog.js"
import { readOr } from "../fs/notFound.js"

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

interface Fold {
  readonly entries: Array<Entry>
  at: number
  more: number
}

/** One line of pi's output as a timeline entry (or none), timed by the last timestamp pi gave. */
const step = (f: Fold, line: string): Fold => {
  const e = readTimelineEvent(line)
  if (!e) return f
  if (e.timestamp !== undefined) f.at = Math.max(f.at, e.timestamp)
  if (e.kind === "timed") return f
  const { timestamp: _, ...shown } = e
  if (f.entries.length < MAX_ENTRIES) f.entries.push({ ...shown, at: f.at })
  else f.more++
  return f
}

/** A line of messages.jsonl: what the box sent its person with message_user, and when. */
const decodeMessageLine = Schema.decodeUnknownOption(Schema.parseJson(Schema.Struct({ time: Schema.optional(Schema.String), text: Schema.optional(Schema.String) })))

/**
 * A run's timeline: pi's turns, prompts, answers and tool calls with their output, the gateway's
 * requests and the messages the box sent its person, interleaved by time. The transcript is read
 * line by line, whatever its size.
 */
export const timelineOf = (run: RunRecord, runDir: string) =>
  Effect.gen(function*() {
    const files = runFiles(runDir)
    const started = Date.parse(run.started_at)
    // The run page shows what it can (readOr: a file not there yet is none; one that cannot be read is said).
    const fold = yield* foldFileLines(files.transcript, { entries: [], at: started, more: 0 } as Fold, step).pipe(
      readOr(files.transcript, { entries: [], at: started, more: 0 } as Fold, "web: ")
    )
    const requests: Array<Entry> = (yield* auditOf(run)).map((r) => ({
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
      // A torn line is skipped.
      const m = decodeMessageLine(line)
      if (Option.isSome(m) && acc.length < MAX_ENTRIES) acc.push({ kind: "message", at: Date.parse(m.value.time ?? "") || started, text: m.value.text ?? "" })
      return acc
    }).pipe(readOr(files.messages, [] as Array<Entry>, "web: "))
    // pi's own order is kept: a stable sort by time only moves requests and messages in between.
    const entries = [...fold.entries, ...requests, ...messages].map((e, i) => ({ e, i })).sort((a, b) => a.e.at - b.e.at || a.i - b.i).map((x) => x.e)
    return { entries, more: fold.more }
  })
