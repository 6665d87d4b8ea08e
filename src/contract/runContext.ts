import { Schema } from "effect"
import { ChannelName, RunId, TaskId, WorkerName } from "../config/names.js"
import { ChatPlace, RunOrigin } from "./origin.js"
import { Taint } from "./taint.js"

/** Where a run happens: a one-shot run, a queued task, or a warm session in a terminal, the web UI or a chat channel. */
export const Surface = Schema.Literal("direct-box", "queued-task", "term-session", "web-session", "chat-session")
export type Surface = typeof Surface.Type

/**
 * `data/contexts/<worker>/<run-id>.json`: what a run is for and where its answer goes, saved
 * host-side before its box starts and after each turn of a session. Never in the run's folder
 * (the box sees that read-only) and never mounted: the gateway's memory and reply checks read it.
 */
export const RunContext = Schema.Struct({
  run_id: RunId,
  worker: WorkerName,
  surface: Surface,
  /** A chat session's service and channel. */
  chat: Schema.optional(ChatPlace),
  origin: RunOrigin,
  task_id: Schema.NullOr(TaskId),
  channel: Schema.NullOr(ChannelName),
  /** Where the run's answer goes (a task's reply_to); null: to whoever started it, as today. */
  reply_to: Schema.NullOr(Schema.String),
  /** The task and run this one continues (its pi session resumed). */
  continues: Schema.NullOr(Schema.Struct({ task_id: Schema.NullOr(TaskId), run_id: RunId })),
  taints: Schema.Array(Taint),
  /** The chat channel whose budget the run's spending counts against (`slack:<id>`), if any. */
  chat_channel: Schema.optional(Schema.String),
  /** The memory entries the Start briefing carried, by id. */
  memory_briefed: Schema.Array(Schema.String),
  turns: Schema.Number,
  /** The last turn's message: who wrote it and in which role. */
  last_message: Schema.optional(Schema.Struct({ author: Schema.String, role: Schema.String })),
  saved_at: Schema.String
})
export type RunContext = typeof RunContext.Type
