import { type Effect, Schema } from "effect"
import { ChannelName, RunId } from "../config/names.js"

/** What an entry is about: the worker in general, or one channel it serves. */
export const MemoryScope = Schema.Union(
  Schema.Literal("worker"),
  Schema.TemplateLiteral(Schema.Literal("channel:"), Schema.String).pipe(
    Schema.filter((s) => Schema.is(ChannelName)(s.slice("channel:".length)) || `${s}: not a channel name`)
  )
)
export type MemoryScope = typeof MemoryScope.Type

const MEMORY_ID = /^m-[0-9a-f]{8}$/
export const MemoryId = Schema.String.pipe(Schema.filter((s) => MEMORY_ID.test(s) || `"${s}" is not a memory entry id (m-xxxxxxxx)`))

/** One line of `data/memory/<worker>.jsonl`: an entry written, forgotten, accepted by a person, or held for review. */
export const MemoryEvent = Schema.Union(
  Schema.TaggedStruct("add", {
    id: MemoryId,
    text: Schema.String,
    scope: MemoryScope,
    /** The run that wrote it (from its token), or null for a person. */
    run_id: Schema.NullOr(RunId),
    time: Schema.String,
    /** Written by a tainted run: not briefed until a person accepts it. */
    pending: Schema.Boolean
  }),
  Schema.TaggedStruct("forget", { id: MemoryId, time: Schema.String, by: Schema.String }),
  Schema.TaggedStruct("accept", { id: MemoryId, time: Schema.String, by: Schema.String }),
  Schema.TaggedStruct("hold", { id: MemoryId, time: Schema.String, reason: Schema.String })
)
export type MemoryEvent = typeof MemoryEvent.Type

/** An entry as it stands now. */
export interface MemoryEntry {
  readonly id: string
  readonly text: string
  readonly scope: MemoryScope
  readonly run_id: string | null
  readonly time: string
  readonly pending: boolean
  readonly held_reason?: string
}

/** A write the store refused, in words the agent (or a person) can act on. */
export class MemoryRefused extends Schema.TaggedError<MemoryRefused>()("MemoryRefused", { status: Schema.Number, detail: Schema.String }) {
  override get message() {
    return this.detail
  }
}

/** The memory log could not be read or written: where, why, and (when it is not a file) the fix. */
export class MemoryError extends Schema.TaggedError<MemoryError>()("MemoryError", {
  file: Schema.String,
  detail: Schema.String,
  fix: Schema.optional(Schema.String)
}) {
  override get message() {
    return this.fix === undefined
      ? `the memory file ${this.file} cannot be used: ${this.detail} — check that the data folder is writable`
      : `the memory log ${this.file} cannot be used: ${this.detail} — ${this.fix}`
  }
}

/** What an entry being written carries; the store adds its id and time. */
export interface NewMemory {
  readonly text: string
  readonly scope: MemoryScope
  readonly runId: string | null
  readonly pending: boolean
}

/** The bounds of `[memory]`. */
export interface MemoryBounds {
  readonly max_entries: number
  readonly entry_max: number
}

/** One line of the log, or None when it is not one (torn, damaged). */
export const decodeMemoryLine = Schema.decodeUnknownOption(Schema.parseJson(MemoryEvent))

/** Entries newest first by when they were written (the order a briefing, the CLI and the web show them). */
export const newestFirst = (entries: ReadonlyArray<MemoryEntry>): ReadonlyArray<MemoryEntry> =>
  entries.map((e, i) => ({ e, i })).sort((a, b) => (a.e.time < b.e.time ? 1 : a.e.time > b.e.time ? -1 : b.i - a.i)).map((x) => x.e)

/** The entries an event log leaves: forgotten ones gone, accepted ones no longer pending, held ones pending again. */
export const foldMemory = (events: ReadonlyArray<MemoryEvent>): ReadonlyArray<MemoryEntry> => {
  const entries = new Map<string, MemoryEntry>()
  for (const e of events) {
    const current = entries.get(e.id)
    switch (e._tag) {
      case "add":
        if (!current) entries.set(e.id, { id: e.id, text: e.text, scope: e.scope, run_id: e.run_id, time: e.time, pending: e.pending })
        break
      case "forget":
        entries.delete(e.id)
        break
      case "accept":
        if (current) {
          const { held_reason: _, ...rest } = current
          entries.set(e.id, { ...rest, pending: false })
        }
        break
      case "hold":
        if (current && !current.pending) entries.set(e.id, { ...current, pending: true, held_reason: e.reason })
        break
    }
  }
  return [...entries.values()]
}


/**
 * Where a memory store keeps its workers' event logs: read a worker's events, append some, and
 * run a change with the worker's log to itself (a bound checked and filled by one writer).
 */
export interface MemoryLog {
  readonly read: (worker: string) => Effect.Effect<ReadonlyArray<MemoryEvent>, MemoryError>
  readonly append: (worker: string, events: ReadonlyArray<MemoryEvent>) => Effect.Effect<void, MemoryError>
  readonly exclusive: <A, E>(worker: string, change: Effect.Effect<A, E>) => Effect.Effect<A, E | MemoryError>
}

