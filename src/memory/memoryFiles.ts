import { FileSystem, Path } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { Clock, Context, Effect } from "effect"
import type { Layout } from "../config/Paths.js"
import { atomicIn } from "../fs/atomic.js"
import type { Files } from "../fs/Files.js"
import { withFileLock } from "../fs/fileLock.js"
import { decodeMemoryLine, foldMemory, MemoryError, type MemoryEvent, type MemoryLog } from "./memoryEvents.js"

/** A log is compacted once it holds at least this many lines… */
export const COMPACT_MIN_LINES = 200
/** …and more than this share of them no longer describe a live entry. */
export const COMPACT_DEAD_SHARE = 0.5

/** What this process has read of one worker's log: up to `offset` (always just after a newline) of the file `ino`. */
interface Read {
  readonly ino: number
  readonly offset: number
  readonly events: ReadonlyArray<MemoryEvent>
  /** Every line read, decodable or not. */
  readonly lines: number
}

const NEWLINE = 10

/** The complete lines of `bytes` (up to its last newline), and how many bytes they take. */
const completeLines = (bytes: Uint8Array) => {
  const end = bytes.lastIndexOf(NEWLINE) + 1
  const text = new TextDecoder().decode(bytes.subarray(0, end))
  return { lines: end === 0 ? [] : text.slice(0, -1).split("\n"), used: end }
}

/** The bytes of `file` from `from` on (the part of the log this process has not read yet). */
const bytesFrom = (fs: FileSystem.FileSystem, file: string, from: number) =>
  Effect.scoped(Effect.gen(function*() {
    const handle = yield* fs.open(file, { flag: "r" })
    const size = Number((yield* handle.stat).size)
    if (size <= from) return new Uint8Array(0)
    yield* handle.seek(from, "start")
    const got = yield* handle.readAlloc(size - from)
    return got._tag === "Some" ? got.value : new Uint8Array(0)
  }))

/** What the logs are read and written through, taken once where the store is built. */
export interface MemoryFilesOver {
  readonly fs: FileSystem.FileSystem
  readonly path: Path.Path
  readonly layout: Layout
  readonly files: Context.Tag.Service<Files>
}

/**
 * One machine's memory logs (`data/memory/<worker>.jsonl`): each read once and after that only
 * what was appended since — by this process or another (the CLI beside the daemon) — so a call
 * costs the new lines, not the whole log. An append after a torn last line (a write cut short)
 * first puts that line aside in `data/memory/unreadable/` and starts on a new line, so the next
 * entry is never glued to it. A log whose lines are mostly dead (forgotten entries) is rewritten
 * atomically to what it holds now. Every change holds the worker's lock in this process and a
 * lock file between processes.
 */
export const makeMemoryFiles = ({ files, fs, layout, path }: MemoryFilesOver): MemoryLog => {
  const { writeAtomic } = atomicIn(fs, path)
  const known = new Map<string, Read>()
  const locks = new Map<string, Effect.Semaphore>()
  const lockOf = (worker: string) => {
    const made = locks.get(worker) ?? Effect.unsafeMakeSemaphore(1)
    locks.set(worker, made)
    return made
  }
  const fileOf = (worker: string) => layout.memoryFile(worker)
  const failed = (worker: string) => (e: PlatformError | { readonly message: string }) =>
    Effect.fail(new MemoryError({ file: fileOf(worker), detail: e.message }))

  /** The log as it is now: what was read before and the lines appended since (all of it again when the file was replaced). */
  const catchUp = (worker: string) =>
    Effect.gen(function*() {
      const file = fileOf(worker)
      const stat = yield* fs.stat(file).pipe(Effect.option)
      if (stat._tag === "None") {
        known.delete(worker)
        return { ino: -1, offset: 0, events: [], lines: 0 } satisfies Read
      }
      const ino = Number(stat.value.ino._tag === "Some" ? stat.value.ino.value : -1)
      const size = Number(stat.value.size)
      const before = known.get(worker)
      const base = before && before.ino === ino && before.offset <= size ? before : { ino, offset: 0, events: [], lines: 0 }
      if (base.offset === size) return base
      const { lines, used } = completeLines(yield* bytesFrom(fs, file, base.offset))
      const events = [...base.events]
      for (const line of lines) {
        const e = decodeMemoryLine(line)
        if (e._tag === "Some") events.push(e.value)
      }
      const now: Read = { ino, offset: base.offset + used, events, lines: base.lines + lines.length }
      known.set(worker, now)
      return now
    })

  /** A torn last line is put aside (kept as it was, for a person) and cut off the log, so an append starts on a line of its own. */
  const setAsideTornTail = (worker: string, file: string) =>
    Effect.gen(function*() {
      const read = yield* catchUp(worker)
      const stat = yield* fs.stat(file).pipe(Effect.option)
      if (stat._tag === "None" || Number(stat.value.size) === read.offset) return
      const torn = yield* bytesFrom(fs, file, read.offset)
      const aside = path.join(path.dirname(file), "unreadable", `${worker}.${yield* Clock.currentTimeMillis}.torn.jsonl`)
      yield* writeAtomic(aside, torn, 0o600)
      yield* fs.truncate(file, read.offset)
      yield* Effect.logWarning(`memory of ${worker}: its log ended in a torn line (${torn.length} bytes, a write cut short); kept aside in ${aside}`)
    })

  /** The log rewritten to the entries it holds (each as written, with its pending or held state), in one rename. */
  const compact = (worker: string, file: string, read: Read) =>
    Effect.gen(function*() {
      const entries = foldMemory(read.events)
      const events = entries.flatMap((e): ReadonlyArray<MemoryEvent> =>
        e.held_reason !== undefined
          ? [{ _tag: "add", id: e.id, text: e.text, scope: e.scope, run_id: e.run_id, time: e.time, pending: false }, { _tag: "hold", id: e.id, time: e.time, reason: e.held_reason }]
          : [{ _tag: "add", id: e.id, text: e.text, scope: e.scope, run_id: e.run_id, time: e.time, pending: e.pending }])
      yield* writeAtomic(file, events.map((e) => `${JSON.stringify(e)}\n`).join(""), 0o600)
      known.delete(worker)
      yield* Effect.logInfo(`memory of ${worker}: its log compacted from ${read.lines} lines to ${events.length}`)
    })

  const append = (worker: string, events: ReadonlyArray<MemoryEvent>) =>
    Effect.gen(function*() {
      if (events.length === 0) return
      const file = fileOf(worker)
      yield* fs.makeDirectory(path.dirname(file), { recursive: true, mode: 0o700 })
      yield* setAsideTornTail(worker, file)
      yield* files.append(file, events.map((e) => `${JSON.stringify(e)}\n`).join(""), 0o600)
      const read = yield* catchUp(worker)
      const live = foldMemory(read.events).length
      if (read.lines >= COMPACT_MIN_LINES && read.lines - live > read.lines * COMPACT_DEAD_SHARE) yield* compact(worker, file, read)
    }).pipe(Effect.catchTag("SystemError", "BadArgument", failed(worker)))

  return {
    read: (worker) => catchUp(worker).pipe(Effect.map((r) => r.events), Effect.catchTag("SystemError", "BadArgument", failed(worker))),
    append,
    exclusive: (worker, change) => {
      const file = fileOf(worker)
      const busy = (e: { readonly message: string }) => new MemoryError({ file, detail: e.message })
      return lockOf(worker).withPermits(1)(change.pipe(withFileLock(`${file}.lock`, busy)))
    }
  }
}
