import { Clock, Context, Effect, Layer } from "effect"
import * as crypto from "node:crypto"
import { FileSystem, Path } from "@effect/platform"
import { type HostFiles, layout, Paths } from "../config/Paths.js"
import { Files } from "../fs/Files.js"
import { foldMemory, type MemoryBounds, type MemoryEntry, MemoryError, type MemoryEvent, type MemoryLog, MemoryRefused, type NewMemory } from "./memoryEvents.js"
import { makeMemoryFiles } from "./memoryFiles.js"

export * from "./memoryEvents.js"

/** What the store's layer is built from: the files it reads, taken once when it is built. */
export type MemoryEnv = HostFiles | Files

/** An entry id the worker does not have yet. */
const freshId = (known: ReadonlyArray<MemoryEntry>): string => {
  const id = `m-${crypto.randomBytes(4).toString("hex")}`
  return known.some((e) => e.id === id) ? freshId(known) : id
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
  /**
   * One machine's files: each worker's log read once and then only what was appended to it (by
   * this process or another), compacted when most of it is dead; a change holds the worker's
   * lock, this process's and the machine's (a lock file), so the CLI and the daemon never interleave.
   */
  static readonly layer = Layer.effect(MemoryStore, Effect.gen(function*() {
    // The files it works through are taken here, once: its calls need nothing of their caller.
    const over = { fs: yield* FileSystem.FileSystem, path: yield* Path.Path, layout: layout(yield* Paths), files: yield* Files }
    return memoryStoreOver(makeMemoryFiles(over))
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
