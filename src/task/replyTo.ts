import { Effect } from "effect"
import { parseReplyTo } from "../contract/origin.js"
import { TaskRefused } from "./TaskRecord.js"
import { TaskStore } from "./TaskStore.js"

/**
 * A reply target checked before a task is queued (by a person or a worker's set_tasks): a form
 * roster knows, a task that exists, and (until the chat surfaces exist) no chat thread.
 */
export const checkReplyTo = Effect.fn("tasks.checkReplyTo")(function*(replyTo: string) {
  const target = parseReplyTo(replyTo)
  if (target._tag === "invalid") return yield* Effect.fail(new TaskRefused({ detail: `reply_to: ${target.why}` }))
  if (target._tag === "chat") {
    return yield* Effect.fail(new TaskRefused({
      detail: `reply_to ${replyTo}: answers to a chat thread come with roster's chat surfaces, which this roster does not have yet — use talk:<run-id>, task:<task-id> or none`
    }))
  }
  if (target._tag === "task" && !(yield* (yield* TaskStore).get(target.taskId))) {
    return yield* Effect.fail(new TaskRefused({ detail: `reply_to ${replyTo}: no such task — list them: roster task list` }))
  }
  return replyTo.trim()
})
