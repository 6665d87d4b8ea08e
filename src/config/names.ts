import { Effect, Schema } from "effect"

const WORKER_NAME = /^[a-z][a-z0-9-]{0,31}$/

/** A worker name roster refuses (it becomes paths and labels), with the rule. */
export class InvalidWorkerName extends Schema.TaggedError<InvalidWorkerName>()("InvalidWorkerName", {
  name: Schema.String
}) {
  override get message() {
    return `"${this.name}" is not a worker name: use 1-32 characters of a-z, 0-9 and "-", starting with a letter (e.g. "alice")`
  }
}

export const isWorkerName = (name: string): boolean => WORKER_NAME.test(name)

/** Checked before any file or Docker call, so a name can never become a path or a label it shouldn't. */
export const validateWorkerName = (name: string) =>
  isWorkerName(name) ? Effect.succeed(name) : Effect.fail(new InvalidWorkerName({ name }))

const CHANNEL_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/

/** A channel name that could not be a folder name; refused before any file is touched. */
export class InvalidChannelName extends Schema.TaggedError<InvalidChannelName>()("InvalidChannelName", {
  name: Schema.String
}) {
  override get message() {
    return `"${this.name}" is not a channel name: use 1-64 characters of a-z, 0-9, ".", "_" and "-", starting with a letter or digit (e.g. "ops")`
  }
}

/** A channel name becomes a folder: checked like a worker's, before any file is touched. */
export const validateChannelName = (name: string) =>
  CHANNEL_NAME.test(name) ? Effect.succeed(name) : Effect.fail(new InvalidChannelName({ name }))

const RUN_ID = /^\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}-[0-9a-f]{8}$/
export const isRunId = (id: string): boolean => RUN_ID.test(id)

const TASK_ID = /^t-[0-9a-f]{8}$/
export const isTaskId = (id: string): boolean => TASK_ID.test(id)

/**
 * The same checks as Schemas, for every record read back from disk or the wire: a name in a
 * hand-written or damaged file is refused by its decoder before it can become a path.
 */
export const WorkerName = Schema.String.pipe(Schema.filter((s) => isWorkerName(s) || `"${s}" is not a worker name`))
export const ChannelName = Schema.String.pipe(Schema.filter((s) => CHANNEL_NAME.test(s) || `"${s}" is not a channel name`))
export const RunId = Schema.String.pipe(Schema.filter((s) => isRunId(s) || `"${s}" is not a run id`))
export const TaskId = Schema.String.pipe(Schema.filter((s) => isTaskId(s) || `"${s}" is not a task id`))
