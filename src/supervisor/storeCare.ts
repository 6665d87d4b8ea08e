import { keepMarksUpTo } from "../run/storeMarks.js"
import { FileSystem } from "@effect/platform"
import { Duration, Effect, Schedule, Schema } from "effect"
import { BoxBackend } from "../backend/BoxBackend.js"
import type { FoundBox } from "../backend/foundBox.js"
import { runFiles } from "../contract/runFiles.js"
import { hostUser } from "../box/provision.js"
import { restoreSnapshot, snapshotIdAt, snapshotInfos, snapshotStore } from "../box/store.js"
import { validateWorkerName } from "../config/names.js"
import { Paths, layout } from "../config/Paths.js"
import { listWorkers, readWorkerSettings } from "../worker/workers.js"
import { deploymentBoxes } from "./watch.js"

/** A store operation refused with the reason and the fix (no such snapshot, a box of the worker is running). */
export class StoreRefused extends Schema.TaggedError<StoreRefused>()("StoreRefused", { detail: Schema.String }) {
  override get message() {
    return this.detail
  }
}

/** The worker's boxes now, each with whether a run is in it: a warm box no run has taken (no run record yet) is not a run. */
const boxesOf = (worker: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const files = layout(yield* Paths)
    const out: Array<{ readonly box: FoundBox; readonly run: boolean }> = []
    for (const box of (yield* deploymentBoxes).filter((b) => b.worker === worker)) {
      // A warm box whose record cannot be looked at is taken for a run's: its store is left alone.
      const taken = box.kind !== "warm" || (yield* fs.exists(runFiles(files.runDir(worker, box.runId)).record).pipe(Effect.orElseSucceed(() => true)))
      out.push({ box, run: taken })
    }
    return out
  })

/** The worker's runs in a box right now (a store must not change under one). */
const liveRunsOf = (worker: string) => Effect.map(boxesOf(worker), (bs) => bs.filter((b) => b.run).map((b) => b.box.runId))

/**
 * `roster store restore`: the snapshot becomes the worker's store. Refused while a box of the
 * worker runs; the current store is snapshotted first (kept one past the worker's limit, so the
 * snapshot being restored is never the one pruned to make room).
 */
export const restoreStore = Effect.fn("store.restoreStore")(function*(worker: string, snapshot: string) {
  yield* validateWorkerName(worker)
  const infos = yield* snapshotInfos(worker)
  if (!infos.some((s) => s.id === snapshot)) {
    return yield* new StoreRefused({ detail: `${worker} has no snapshot "${snapshot}": list them with roster store list ${worker}` })
  }
  const boxes = yield* boxesOf(worker)
  const live = boxes.filter((b) => b.run).map((b) => b.box.runId)
  if (live.length > 0) {
    return yield* new StoreRefused({ detail: `${worker} has a box running (run ${live.join(", ")}): restore once it ended (roster server status lists live boxes)` })
  }
  // A warm box has the store it was made with mounted: it goes before the store changes (its daemon finds it
  // gone when a run would take it, and makes another after the next run).
  const backend = yield* BoxBackend
  for (const { box } of boxes) yield* backend.remove(box.id).pipe(Effect.catchAll((e) => Effect.logWarning(`warm box ${box.name}: ${e.message}`)))
  const keep = (yield* readWorkerSettings(worker)).store.snapshots
  const saved = yield* snapshotStore(worker, yield* snapshotIdAt(worker, "restore"), keep + 1)
  const user = hostUser()
  yield* restoreSnapshot(worker, snapshot, user.uid !== process.getuid?.() ? user : undefined)
  // What runs after the snapshot left in the store is gone with it: so are their taint marks.
  const unmarked = yield* keepMarksUpTo({ worker }, snapshot).pipe(
    Effect.catchAll((e) => Effect.logWarning(`${worker}'s store: its taint marks could not be updated (${e.message})`).pipe(Effect.as(0)))
  )
  return { restored: snapshot, saved: saved?.dir ?? null, unmarked }
})

/**
 * The daemon's sweep: a snapshot of each store that changed since its last one outside a run
 * (an edit on the host, say). A worker with a live box is left to its run's own snapshot.
 */
export const sweepStores = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const files = layout(yield* Paths)
  const taken: Array<string> = []
  for (const worker of yield* listWorkers) {
    // A store that cannot be looked at is left as it is: no snapshot taken or pruned this pass.
    if (!(yield* fs.exists(files.storeDir(worker)).pipe(Effect.orElseSucceed(() => false)))) continue
    if ((yield* liveRunsOf(worker)).length > 0) continue
    // A worker.toml that does not read keeps the default count (5): the next run's start says what is wrong with it.
    const keep = (yield* readWorkerSettings(worker).pipe(Effect.orElseSucceed(() => ({ store: { snapshots: 5 } })))).store.snapshots
    const done = yield* snapshotStore(worker, yield* snapshotIdAt(worker, "sweep"), keep).pipe(
      Effect.catchAll((e) => Effect.logWarning(`store sweep: ${worker}: ${e.message}`).pipe(Effect.as(undefined)))
    )
    if (done) {
      yield* Effect.logInfo(`store sweep: ${worker} changed outside a run: snapshot (${done.changes} change${done.changes === 1 ? "" : "s"})`)
      taken.push(worker)
    }
  }
  return taken
})

export const SWEEP_EVERY = Duration.hours(24)

/** Daily, from a few minutes after the daemon starts; a failed pass is logged and the next one still runs. */
export const sweepLoop = Effect.sleep(Duration.minutes(5)).pipe(
  Effect.zipRight(
    sweepStores.pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("store sweep failed", cause)),
      Effect.repeat(Schedule.spaced(SWEEP_EVERY))
    )
  )
)
