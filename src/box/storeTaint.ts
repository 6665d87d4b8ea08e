import { Clock, Effect, Option } from "effect"
import { isTainted } from "../contract/taint.js"
import type { OpenRecord } from "../run/record.js"
import { RunLog } from "../run/RunLog.js"
import { markStore, readMarks, type StorePlace, storeName } from "../run/storeMarks.js"
import { TaskStore } from "../task/TaskStore.js"
import { isFinal } from "../task/TaskRecord.js"
import type { TaintSource } from "./inheritTaint.js"

/**
 * At a run's end, once its box is gone: a tainted run marks the stores it could change — the worker's
 * store when it changed (or when that is not known: no snapshot was taken), its channel's store always
 * (no snapshot measures it) — so every later run given them starts tainted while it is (storeSources).
 * A mark that cannot be written is logged as an error: the store then reads clean to later runs.
 */
export const marksOnClose = (record: Pick<OpenRecord, "worker" | "runId">, storeChanged: boolean) =>
  Effect.gen(function*() {
    const run = yield* (yield* RunLog).read(record.worker, record.runId)
    if (!run || !isTainted(run)) return
    const at = new Date(yield* Clock.currentTimeMillis).toISOString()
    const places: Array<StorePlace> = [
      ...(storeChanged ? [{ worker: record.worker }] : []),
      ...(run.channel !== undefined ? [{ worker: record.worker, channel: run.channel }] : [])
    ]
    for (const place of places) {
      yield* markStore(place, record.runId, at)
      yield* Effect.logWarning(`run ${record.runId}: tainted, it changed ${storeName(place)}: the runs given it start tainted until a person untaints run ${record.runId}`)
    }
  }).pipe(
    Effect.catchAll((e) =>
      Effect.logError(`run ${record.runId}: tainted, and the stores it changed could not be marked (${e.message}): later runs will read them as clean — untaint or restore by hand`))
  )

/**
 * What a new run reads that a tainted run may have left: the stores it is given (their marks), and the
 * prompts of the tasks other runs queued, which sit in its /pihome/self/schedule.json. Each a source its
 * taint follows from (inheritTaints). A store whose marks cannot be read is said in `unknown`: the run
 * starts tainted for it.
 */
export const leftBehind = (worker: string, channel: string | null, self: string) =>
  Effect.gen(function*() {
    const sources: Array<TaintSource> = []
    const unknown: Array<string> = []
    const places: Array<StorePlace> = [{ worker }, ...(channel !== null ? [{ worker, channel }] : [])]
    for (const place of places) {
      const marks = yield* readMarks(place).pipe(Effect.either)
      if (marks._tag === "Left") unknown.push(marks.left.message)
      else for (const m of marks.right) sources.push({ worker, runId: m.run_id, via: "words", where: storeName(place) })
    }
    const store = yield* Effect.serviceOption(TaskStore)
    if (Option.isSome(store)) {
      for (const t of yield* store.value.list) {
        if (t.worker !== worker || isFinal(t.status) || t.origin.run_id === null || t.origin.run_id === self) continue
        sources.push({ worker, runId: t.origin.run_id, via: "words", where: `the prompt of task ${t.task_id} in its schedule (/pihome/self/schedule.json)` })
      }
    }
    // One source per run: a run that marked the store and queued a task taints once.
    return { sources: sources.filter((s, i) => sources.findIndex((o) => o.runId === s.runId) === i), unknown }
  })
