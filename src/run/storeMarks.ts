import { FileSystem, Path } from "@effect/platform"
import { Effect, Schema } from "effect"
import { layout, Paths } from "../config/Paths.js"
import { RunId } from "../config/names.js"
import { writeJson } from "../fs/atomic.js"
import { isNotFound } from "../fs/notFound.js"

/**
 * Which tainted runs changed a store: kept host-side beside the stores, never mounted, so a box cannot
 * clear its own mark. A run given a marked store (its worker's /pihome/store, or its channel's store)
 * starts tainted while a run that marked it is tainted (inheritTaint): a tainted run's words do not pass
 * to a clean run through what it left there. A person's untaint of the run clears its marks; putting back
 * a snapshot taken before the run clears it too.
 */
const Mark = Schema.Struct({ run_id: RunId, at: Schema.String })
export type StoreMark = typeof Mark.Type
const Marks = Schema.parseJson(Schema.Array(Mark))

/** A store's marks file could not be read: whether a tainted run changed the store is not known. */
export class MarksUnreadable extends Schema.TaggedError<MarksUnreadable>()("MarksUnreadable", { file: Schema.String, detail: Schema.String }) {
  override get message() {
    return `the store's taint marks (${this.file}) could not be read: ${this.detail}`
  }
}

/** A store: the worker's own, or the worker's in a channel. */
export type StorePlace = { readonly worker: string; readonly channel?: string | undefined }

const fileOf = (place: StorePlace) =>
  Effect.map(Paths, (p) => (place.channel === undefined ? layout(p).storeMarks(place.worker) : layout(p).channelStoreMarks(place.worker, place.channel)))

export const storeName = (place: StorePlace) =>
  place.channel === undefined ? `${place.worker}'s store (/pihome/store)` : `${place.worker}'s store in channel ${place.channel} (/pihome/channel/store)`

/** The store's marks, oldest first (none when it has no file). */
export const readMarks = (place: StorePlace) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const file = yield* fileOf(place)
    const text = yield* fs.readFileString(file).pipe(
      Effect.catchIf(isNotFound, () => Effect.succeed("[]")),
      Effect.mapError((e) => new MarksUnreadable({ file, detail: e.message }))
    )
    return yield* Schema.decode(Marks)(text).pipe(Effect.mapError((e) => new MarksUnreadable({ file, detail: e.message.split("\n")[0] ?? "it does not decode" })))
  })

const writeMarks = (place: StorePlace, marks: ReadonlyArray<StoreMark>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const file = yield* fileOf(place)
    yield* fs.makeDirectory(path.dirname(file), { recursive: true })
    yield* writeJson(file, marks)
  })

/** Marks the store as changed by a tainted run (once per run). */
export const markStore = (place: StorePlace, runId: string, at: string) =>
  Effect.gen(function*() {
    const marks = yield* readMarks(place)
    if (marks.some((m) => m.run_id === runId)) return
    yield* writeMarks(place, [...marks, { run_id: runId, at }])
  })

/** Drops `runId`'s marks from the stores given; the names of the stores it had marked. */
export const clearMarks = (places: ReadonlyArray<StorePlace>, runId: string) =>
  Effect.gen(function*() {
    const cleared: Array<string> = []
    for (const place of places) {
      const marks = yield* readMarks(place)
      if (!marks.some((m) => m.run_id === runId)) continue
      yield* writeMarks(place, marks.filter((m) => m.run_id !== runId))
      cleared.push(storeName(place))
    }
    return cleared
  })

/** A snapshot taken after `snapshotId` (a run id, or one made the same way) was put back: marks of runs after it go. */
export const keepMarksUpTo = (place: StorePlace, snapshotId: string) =>
  Effect.gen(function*() {
    const marks = yield* readMarks(place)
    const kept = marks.filter((m) => m.run_id <= snapshotId)
    if (kept.length !== marks.length) yield* writeMarks(place, kept)
    return marks.length - kept.length
  })
