import { Schema } from "effect"

/**
 * One message for a live warm session from outside it (a task's reply_to talk:<run-id>), as
 * `data/inbox/<run-id>.jsonl` holds it (in a fleet, `<run-id>.<node>.jsonl` per delivering node):
 * the daemon appends, the session's runner reads.
 */
export const InboxLine = Schema.Struct({
  /** Unique per delivery: a session takes each id once, so a delivery repeated after a crash is not a second turn. */
  id: Schema.String,
  from_task: Schema.String,
  worker: Schema.String,
  status: Schema.String,
  text: Schema.String,
  at: Schema.String
})
export type InboxLine = typeof InboxLine.Type
