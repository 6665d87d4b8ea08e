import { FileSystem, Path } from "@effect/platform"
import { Clock, type Context, Effect } from "effect"
import { Paths, layout } from "../config/Paths.js"
import { orMakeParentIn } from "../fs/orMakeParent.js"
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
  Effect.flatMap(journalOf, (j) => j.appendJournalLines(worker, entries))

/** What a journal is written through: the deployment's folders and the file services. */
export interface JournalPlace {
  readonly fs: FileSystem.FileSystem
  readonly path: Path.Path
  readonly paths: Context.Tag.Service<Paths>
  readonly files: Context.Tag.Service<Files>
}

/** The journal's appends through what a store took when its layer was built: each needs nothing of its caller. */
export const journalIn = ({ files, fs, path, paths }: JournalPlace) => {
  const where = layout(paths)
  const orMakeParent = orMakeParentIn(fs, path)
  const appendJournalLines = (worker: string, entries: ReadonlyArray<JournalEntry>) =>
    Effect.gen(function*() {
      const file = where.journalFile(worker)
      const time = new Date(yield* Clock.currentTimeMillis).toISOString()
      yield* orMakeParent(file, files.append(file, entries.map((entry) => `${JSON.stringify({ time, worker, ...entry })}\n`).join(""), 0o644))
    }).pipe(Effect.catchAll((e) => Effect.logWarning(`the journal of ${worker} could not be written: ${e.message}`)))
  return { appendJournalLines, appendJournal: (worker: string, entry: JournalEntry) => appendJournalLines(worker, [entry]) }
}

const journalOf = Effect.map(Effect.all({ files: Files, fs: FileSystem.FileSystem, path: Path.Path, paths: Paths }), journalIn)

/** Makes sure the journal exists so every box mounts it (an empty journal is still the worker's view). */
export const ensureJournal = (worker: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const file = layout(yield* Paths).journalFile(worker)
    yield* fs.makeDirectory((yield* Path.Path).dirname(file), { recursive: true })
    if (!(yield* fs.exists(file))) yield* (yield* Files).append(file, "", 0o644)
    return file
  })
