import { FileSystem, Path } from "@effect/platform"
import { Effect, Either, Option, ParseResult, Schema } from "effect"
import * as crypto from "node:crypto"
import { isTaskId, isWorkerName, WorkerName } from "../config/names.js"
import { type TaskRecord, TaskRecord as TaskRecordSchema } from "./TaskRecord.js"
import { isNotFound } from "../fs/notFound.js"

/** A record file read: the task, nothing (gone meanwhile, or not readable now), or why it does not decode. */
export type TaskFile =
  | { readonly _tag: "Task"; readonly task: TaskRecord }
  | { readonly _tag: "Gone" }
  | { readonly _tag: "Undecodable"; readonly error: string; readonly raw: string }

const decode = Schema.decodeUnknownEither(Schema.parseJson(TaskRecordSchema), { errors: "first" })

/**
 * Reads one record file. Only a file that reads and does not decode is Undecodable: an I/O error is no
 * verdict — a file gone meanwhile (renamed by a writer) is Gone; any other error is said, and the file
 * is left as it is for the next look (it is not put aside for what may pass).
 */
export const readTaskFile = (fs: FileSystem.FileSystem) => (file: string) =>
  fs.readFileString(file).pipe(
    Effect.map((raw): TaskFile => {
      const decoded = decode(raw)
      if (Either.isRight(decoded)) return { _tag: "Task", task: decoded.right }
      const why = ParseResult.TreeFormatter.formatErrorSync(decoded.left).split("\n").slice(-1)[0]?.trim() ?? "does not decode"
      return { _tag: "Undecodable", error: raw.trim() === "" ? "the file is empty" : why, raw }
    }),
    Effect.catchAll((e) =>
      isNotFound(e)
        ? Effect.succeed<TaskFile>({ _tag: "Gone" })
        : Effect.logWarning(`task record ${file} could not be read (${e.message}): left out of this look, tried again at the next`).pipe(
          Effect.as<TaskFile>({ _tag: "Gone" })
        )
    )
  )

/** The id an unreadable file is listed under: its own name when that is a task id, else one made from the name. */
export const unreadableId = (name: string) => {
  const base = name.replace(/\.json$/, "")
  return isTaskId(base) ? base : `t-${crypto.createHash("sha256").update(name).digest("hex").slice(0, 8)}`
}

/** Whatever of the damaged record can be trusted: only a valid worker name (anything else is a guess). */
const WorkerOnly = Schema.parseJson(Schema.Struct({ worker: WorkerName }))
const salvagedWorker = (raw: string) => Option.getOrUndefined(Option.map(Schema.decodeUnknownOption(WorkerOnly)(raw), (r) => r.worker))

/**
 * Moves an undecodable record out of the records folder into `aside`, as it was (never
 * rewritten or deleted); a second file of the same name gets a suffix. Its note file beside it
 * keeps what was wrong, so the listing can say it without reading it again.
 */
export const putAside = (fs: FileSystem.FileSystem, path: Path.Path) => Effect.fn("tasks.putAside")(function*(file: string, aside: string, error: string, raw: string) {
  yield* fs.makeDirectory(aside, { recursive: true })
  let target = path.join(aside, path.basename(file))
  for (let n = 2; yield* fs.exists(target); n++) target = path.join(aside, `${path.basename(file, ".json")}.${n}.json`)
  yield* fs.rename(file, target)
  const worker = salvagedWorker(raw)
  yield* fs.writeFileString(`${target}.why`, `${JSON.stringify({ error, ...(worker ? { worker } : {}) })}\n`)
  return target
})

const Why = Schema.parseJson(Schema.Struct({ error: Schema.String, worker: Schema.optional(Schema.String) }))

/**
 * A file put aside, as the failed task it is listed as: never run, never waited for (a task
 * `--after` it fails), its reason saying what was wrong and where the file is.
 */
export const asideAsTask = (fs: FileSystem.FileSystem, path: Path.Path) => Effect.fn("tasks.asideAsTask")(function*(file: string) {
  const why = yield* fs.readFileString(`${file}.why`).pipe(Effect.flatMap(Schema.decode(Why)), Effect.orElseSucceed(() => ({ error: "does not decode", worker: undefined })))
  const info = yield* fs.stat(file).pipe(Effect.option)
  const time = info._tag === "Some" && info.value.mtime._tag === "Some" ? info.value.mtime.value.toISOString() : new Date(0).toISOString()
  const name = path.basename(file).replace(/\.\d+\.json$/, ".json")
  return {
    task_id: unreadableId(name),
    worker: why.worker !== undefined && isWorkerName(why.worker) ? why.worker : "unknown",
    prompt: "",
    status: "failed",
    seq: 0,
    ceiling_min: null,
    after: null,
    origin: { by: "person", run_id: null, task_id: null },
    created_at: time,
    updated_at: time,
    started_at: null,
    finished_at: time,
    run_ids: [],
    ended_by: null,
    exit_code: null,
    reason: `record unreadable: ${why.error} — the file is kept at ${file}; fix it and move it back to the records folder, or delete it`,
    unreadable: { file }
  } satisfies TaskRecord
})
