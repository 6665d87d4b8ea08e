import { FileSystem, Path } from "@effect/platform"
import { removeUntakenWarm } from "../box/warmBox.js"
import { HANDOVER_FILE, HandOverMark } from "../box/warmHandOver.js"
import { finishRepos } from "../knowledge/backstop.js"
import { Effect, Ref, Schema } from "effect"
import { isRunId, isWorkerName } from "../config/names.js"
import { Paths, layout } from "../config/Paths.js"
import { IdentityRecord } from "../contract/identity.js"
import { ownerAlive } from "../contract/owner.js"
import { BoxBackend } from "../backend/BoxBackend.js"
import { readJsonOptional } from "../fs/atomic.js"
import { namesIn } from "../fs/namesIn.js"
import { readRunDir } from "../run/RunLog.js"
import type { SupervisorState } from "./state.js"
import { finishLeftRun } from "./takeOver.js"
import { isNotFound } from "../fs/notFound.js"

const idsOf = (dir: string, keep: (name: string) => boolean) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => namesIn(fs, dir, "the sweep of boxless runs' folder")).pipe(Effect.map((names) => names.filter(keep)))

/**
 * Runs that never got a box (their owner killed with -9 between the record and the container)
 * or lost it: an unfinished record whose owner is dead, with no container of the run in the
 * engine and no fiber of this daemon holding it, is finished `orphaned` and its tokens revoked;
 * a token whose run is finished or has no record is removed. A run still starting — its owner
 * alive — is never touched.
 */
export const sweepStrays = (st: SupervisorState) =>
  Effect.gen(function*() {
    // Runs seen finished are not read again: a deployment's old runs cost one read per daemon, not one every 3 s.
    const settled = st.settled
    const path = yield* Path.Path
    const fs = yield* FileSystem.FileSystem
    const paths = yield* Paths
    const files = layout(paths)
    const boxed = new Set((yield* (yield* BoxBackend).list({ ended: true })).map((b) => b.runId))
    const held = new Set([...(yield* Ref.get(st.held)).values()].map((h) => h.runId))
    const busy = (runId: string) => boxed.has(runId) || held.has(runId)
    const unfinished = new Map<string, string>()
    for (const worker of yield* idsOf(files.runsDir, isWorkerName)) {
      for (const runId of yield* idsOf(files.workerRunsDir(worker), isRunId)) {
        if (settled.has(runId) || busy(runId)) continue
        const record = yield* readRunDir(files.runDir(worker, runId))
        if (!record) {
          yield* abandonedHandOver(worker, runId)
          continue
        }
        if (record.finished_at !== null) {
          settled.add(runId)
          continue
        }
        unfinished.set(runId, worker)
        // Another node's run (a fleet's shared folder): its owner is a process of that node's machine, not this one's.
        if (record.node !== undefined && record.node !== paths.fleet?.node) continue
        if (!record.owner || (yield* ownerAlive(record.owner))) continue
        yield* Effect.logWarning(`run ${runId} of ${worker}: its owner (pid ${record.owner.pid}) died before its box ran — finished as orphaned`)
        yield* finishLeftRun(worker, runId, `its owner (pid ${record.owner.pid}) died before the run's box was started`)
        settled.add(runId)
        unfinished.delete(runId)
      }
    }
    // What is left of a token once its run is over (or was never recorded) is removed.
    for (const name of yield* idsOf(files.identityDir, (n) => n.endsWith(".json"))) {
      const file = path.join(files.identityDir, name)
      // Only a token that reads and is not one is removed as unreadable: one that cannot be read now (too many
      // open files, say) may be a live run's, and is looked at again at the next sweep.
      const text = yield* fs.readFileString(file).pipe(Effect.either)
      if (text._tag === "Left") {
        if (!isNotFound(text.left)) {
          yield* Effect.logWarning(`the token file ${file} could not be read (${text.left.message}): left as it is, looked at again in 3 s`)
        }
        continue
      }
      const token = Schema.decodeUnknownOption(Schema.parseJson(IdentityRecord))(text.right)
      if (token._tag === "Some" && (busy(token.value.run_id) || unfinished.has(token.value.run_id))) continue
      // A warm box still being made (its token comes before its box) by a daemon that lives.
      if (token._tag === "Some" && token.value.warm === true && token.value.maker && (yield* ownerAlive(token.value.maker))) continue
      if (token._tag === "Some" && !settled.has(token.value.run_id)) {
        const record = yield* readRunDir(files.runDir(token.value.worker, token.value.run_id))
        if (record && record.finished_at === null) continue
      }
      const whose = token._tag === "Some" ? `run ${token.value.run_id}, which is over` : `an unreadable identity file ${name}`
      const removed = yield* fs.remove(file).pipe(Effect.either)
      if (removed._tag === "Left") {
        // The gateway refuses it all the same once its run is over; said, with the command, and tried again at the next look.
        yield* Effect.logWarning(`the token of ${whose} could not be removed (${removed.left.message}): remove it with: rm ${file}`)
        continue
      }
      yield* Effect.logInfo(`removed the token of ${whose}`)
      // A warm box's token whose box is gone and that no run took (its daemon was killed): its folder never held a run.
      if (token._tag === "Some" && token.value.warm === true) yield* removeWarmLeft(token.value.worker, token.value.run_id)
    }
  })

/** The folder and clones of a warm box no run took, its box gone: removed, or said with what is left and how to remove it. */
const removeWarmLeft = (worker: string, runId: string) =>
  removeUntakenWarm(worker, runId).pipe(
    Effect.flatMap((had) => (had ? Effect.logInfo(`removed the folder of warm box ${runId} of ${worker}: no run took it`) : Effect.void)),
    Effect.catchAll((e) =>
      Effect.flatMap(Paths, (paths) =>
        Effect.logWarning(`the folder of warm box ${runId} of ${worker} (no run took it) could not be removed (${e.message}): remove it with: rm -rf ${layout(paths).runDir(worker, runId)}`)))
  )

/**
 * A warm box's folder its daemon was handing to a run when it was killed (before the run's record was
 * in): under either id, with no record, marked by a daemon no longer alive. Nothing of a run is in it
 * yet, so it goes, with the clones under either id (their box is the reaper's; their token, the sweep's).
 */
const abandonedHandOver = (worker: string, runId: string) =>
  Effect.gen(function*() {
    const dir = layout(yield* Paths).runDir(worker, runId)
    const mark = Schema.decodeUnknownOption(HandOverMark)(yield* readJsonOptional((yield* Path.Path).join(dir, HANDOVER_FILE)))
    if (mark._tag === "None" || (yield* ownerAlive(mark.value.maker))) return
    yield* (yield* FileSystem.FileSystem).remove(dir, { recursive: true })
    yield* Effect.forEach([mark.value.from, mark.value.to], (id) => finishRepos(worker, id), { discard: true })
    yield* Effect.logInfo(`removed the folder of warm box ${mark.value.from} of ${worker}: its daemon (pid ${mark.value.maker.pid}) died handing it to run ${mark.value.to}, before the run began`)
  }).pipe(Effect.catchAll((e) => Effect.logWarning(`run folder ${runId} of ${worker}: a hand-over its dead daemon left could not be cleared (${e.message}); remove it by hand`)))

/** The same look every 3 s beside the reaper: a run killed before its box existed is finished within seconds. */
export const strayLoop = (st: SupervisorState) =>
  Effect.sleep("3 seconds").pipe(
    Effect.zipRight(sweepStrays(st).pipe(Effect.catchAllCause((c) => Effect.logError("supervisor: a sweep of boxless runs failed", c)))),
    Effect.forever
  )
