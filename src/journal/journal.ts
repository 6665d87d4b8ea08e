import { FileSystem, Path } from "@effect/platform"
import { Clock, Effect } from "effect"
import { Paths, layout } from "../config/Paths.js"
import { orMakeParent } from "../fs/orMakeParent.js"
import { Files } from "../fs/Files.js"

/** One line of a worker's journal: a run started or ended, or one of its tasks changed state. */
export type JournalEntry =
  | {
    readonly kind: "run"
    readonly event: "started" | "ended"
    readonly run_id: string
    readonly task_id: string | null
    readonly ended_by?: string | null
    readonly exit_code?: number | null
  }
  | {
    readonly kind: "task"
    readonly task_id: string
    readonly status: string
    readonly run_id?: string | null
    readonly reason?: string | null
  }
  | {
    /** Another task's answer, delivered to one of this worker's tasks (its reply_to was task:<id>). */
    readonly kind: "reply"
    readonly task_id: string
    readonly from_task: string
    readonly status: string
    readonly text: string
  }

/**
 * Appends a line to `data/journal/<worker>.jsonl`, in place: the file is bind-mounted read-only
 * into the worker's boxes, and a rename would leave a running box reading the old file. A
 * journal that cannot be written is logged; it never fails the run or task it describes.
 */
export const appendJournal = (worker: string, entry: JournalEntry) => appendJournalLines(worker, [entry])

/** Several entries of one worker's journal in one append, in order (a store painting a batch of changes). */
export const appendJournalLines = (worker: string, entries: ReadonlyArray<JournalEntry>) =>
  Effect.gen(function*() {
    const file = layout(yield* Paths).journalFile(worker)
    const time = new Date(yield* Clock.currentTimeMillis).toISOString()
    yield* orMakeParent(file, (yield* Files).append(file, entries.map((entry) => `${JSON.stringify({ time, worker, ...entry })}\n`).join(""), 0o644))
  }).pipe(Effect.catchAll((e) => Effect.logWarning(`the journal of ${worker} could not be written: ${e.message}`)))

/** Makes sure the journal exists so every box mounts it (an empty journal is still the worker's view). */
export const ensureJournal = (worker: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const file = layout(yield* Paths).journalFile(worker)
    yield* fs.makeDirectory((yield* Path.Path).dirname(file), { recursive: true })
    if (!(yield* fs.exists(file))) yield* (yield* Files).append(file, "", 0o644)
    return file
  })
