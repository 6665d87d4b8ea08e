import { FileSystem, Path } from "@effect/platform"
import { Clock, Context, Effect, Layer, Schema } from "effect"
import * as crypto from "node:crypto"
import { ChannelName, RunId } from "../config/names.js"
import { captureHostFiles, Paths, layout } from "../config/Paths.js"
import { Files } from "../fs/Files.js"
import { foldFileLines } from "../fs/lines.js"

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

const decodeLine = Schema.decodeUnknownOption(Schema.parseJson(MemoryEvent))

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

/** What the store reads its files through (captured when its layer is built, like the task store's). */
export type MemoryEnv = Paths | FileSystem.FileSystem | Path.Path | Files

/** A worker's events, from its log file (a missing log is none; an unreadable line is skipped). */
const readEvents = (worker: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const file = layout(yield* Paths).memoryFile(worker)
    if (!(yield* fs.exists(file))) return []
    return yield* foldFileLines(file, [] as Array<MemoryEvent>, (acc, line) => {
      const e = decodeLine(line)
      if (e._tag === "Some") acc.push(e.value)
      return acc
    })
  }).pipe(Effect.catchTag("SystemError", "BadArgument", (e) =>
    Effect.flatMap(Paths, (p) => Effect.fail(new MemoryError({ file: layout(p).memoryFile(worker), detail: e.message })))))

/** Events appended to the worker's log, in one write (its folder made first). */
const appendEvents = (worker: string, events: ReadonlyArray<MemoryEvent>) =>
  Effect.gen(function*() {
    if (events.length === 0) return
    const file = layout(yield* Paths).memoryFile(worker)
    yield* (yield* FileSystem.FileSystem).makeDirectory((yield* Path.Path).dirname(file), { recursive: true, mode: 0o700 })
    yield* (yield* Files).append(file, events.map((e) => `${JSON.stringify(e)}\n`).join(""), 0o600).pipe(
      Effect.mapError((e) => new MemoryError({ file, detail: e.message }))
    )
  }).pipe(Effect.catchTag("SystemError", "BadArgument", (e) =>
    Effect.flatMap(Paths, (p) => Effect.fail(new MemoryError({ file: layout(p).memoryFile(worker), detail: e.message })))))

/** An entry id the worker does not have yet. */
const freshId = (known: ReadonlyArray<MemoryEntry>): string => {
  const id = `m-${crypto.randomBytes(4).toString("hex")}`
  return known.some((e) => e.id === id) ? freshId(known) : id
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

/**
 * A worker's memory: an append-only log of events (written, forgotten, accepted, held), folded
 * into its entries. Written from a box only through the gateway's checked `remember`/`forget`
 * actions (provenance from the run token), and by a person with `roster memory`. One machine
 * keeps each worker's log in `data/memory/<worker>.jsonl` (host-side, never mounted); a fleet
 * in its database, since appends to a shared folder are not atomic across machines.
 */
export class MemoryStore extends Context.Tag("roster/MemoryStore")<MemoryStore, {
  /** The worker's entries, oldest first. */
  readonly list: (worker: string) => Effect.Effect<ReadonlyArray<MemoryEntry>, MemoryError>
  /** Adds an entry within the bounds: its id, or why not. */
  readonly add: (worker: string, entry: NewMemory, bounds: MemoryBounds) => Effect.Effect<MemoryEntry, MemoryRefused | MemoryError>
  /** Forgets an entry (by a run or a person); refused when the worker has no such entry. */
  readonly forget: (worker: string, id: string, by: string) => Effect.Effect<MemoryEntry, MemoryRefused | MemoryError>
  /** A person accepts a pending entry: it is briefed from then on. */
  readonly accept: (worker: string, id: string, by: string) => Effect.Effect<MemoryEntry, MemoryRefused | MemoryError>
  /** Holds every entry a run wrote for a person's review (the run was tainted after it wrote them). */
  readonly holdRun: (worker: string, runId: string, reason: string) => Effect.Effect<number, MemoryError>
}>() {
  /** One machine's files: the per-worker write locks are this process's, and the file services are captured when built. */
  static readonly layer = Layer.effect(MemoryStore, Effect.gen(function*() {
    const env = Context.add(yield* captureHostFiles, Files, yield* Files)
    const own = <A, E>(effect: Effect.Effect<A, E, MemoryEnv>) => Effect.provide(effect, env)
    const locks = new Map<string, Effect.Semaphore>()
    const lockOf = (worker: string) => {
      const known = locks.get(worker)
      if (known) return known
      const made = Effect.unsafeMakeSemaphore(1)
      locks.set(worker, made)
      return made
    }
    return memoryStoreOver({
      read: (worker) => own(readEvents(worker)),
      append: (worker, events) => own(appendEvents(worker, events)),
      exclusive: (worker, change) => lockOf(worker).withPermits(1)(change)
    })
  }))
}

/** The store's rules (bounds, ids, who may accept what) over a log. */
export const memoryStoreOver = (log: MemoryLog): Context.Tag.Service<MemoryStore> => {
  const now = Clock.currentTimeMillis.pipe(Effect.map((ms) => new Date(ms).toISOString()))
  const entries = (worker: string) => Effect.map(log.read(worker), foldMemory)
  const find = (worker: string, id: string) =>
    Effect.flatMap(entries(worker), (known) => {
      const hit = known.find((e) => e.id === id)
      return hit ? Effect.succeed(hit) : Effect.fail(new MemoryRefused({ status: 404, detail: `there is no memory entry ${id} of ${worker} — list them: roster memory list ${worker}` }))
    })
  return {
    list: entries,
    add: (worker, entry, bounds) =>
      log.exclusive(worker, Effect.gen(function*() {
        const text = entry.text.trim()
        if (text === "") return yield* Effect.fail(new MemoryRefused({ status: 400, detail: "remember needs some text" }))
        if (text.length > bounds.entry_max) {
          return yield* Effect.fail(new MemoryRefused({
            status: 400,
            detail: `an entry holds at most ${bounds.entry_max} characters (this one has ${text.length}): say it shorter, or keep the detail in your store and remember where it is`
          }))
        }
        const known = yield* entries(worker)
        if (known.length >= bounds.max_entries) {
          return yield* Effect.fail(new MemoryRefused({
            status: 429,
            detail: `your memory is full (${known.length} of ${bounds.max_entries} entries): forget one you no longer need first`
          }))
        }
        const made: MemoryEntry = { id: freshId(known), text, scope: entry.scope, run_id: entry.runId, time: yield* now, pending: entry.pending }
        yield* log.append(worker, [{ _tag: "add", ...made }])
        return made
      })),
    forget: (worker, id, by) =>
      log.exclusive(worker, Effect.gen(function*() {
        const entry = yield* find(worker, id)
        yield* log.append(worker, [{ _tag: "forget", id, time: yield* now, by }])
        return entry
      })),
    accept: (worker, id, by) =>
      log.exclusive(worker, Effect.gen(function*() {
        const entry = yield* find(worker, id)
        if (!entry.pending) return yield* Effect.fail(new MemoryRefused({ status: 409, detail: `memory entry ${id} is not pending: nothing to accept` }))
        yield* log.append(worker, [{ _tag: "accept", id, time: yield* now, by }])
        const { held_reason: _, ...rest } = entry
        return { ...rest, pending: false }
      })),
    holdRun: (worker, runId, reason) =>
      log.exclusive(worker, Effect.gen(function*() {
        const mine = (yield* entries(worker)).filter((e) => e.run_id === runId && !e.pending)
        const time = yield* now
        yield* log.append(worker, mine.map((e): MemoryEvent => ({ _tag: "hold", id: e.id, time, reason })))
        return mine.length
      }))
  }
}
