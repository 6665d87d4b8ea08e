import { Effect } from "effect"
import { OrgConfig } from "../config/OrgConfig.js"
import { chatFor } from "../config/schema.js"
import { parseReplyTo } from "../contract/origin.js"
import { TaskRefused } from "./TaskRecord.js"
import { TaskStore } from "./TaskStore.js"

/**
 * A reply target checked before a task is queued (by a person or a worker's set_tasks): a form
 * roster knows, a task that exists, a chat channel org.toml maps (a worker cannot post where
 * it is not mapped, not even through a task's answer).
 */
export const checkReplyTo = Effect.fn("tasks.checkReplyTo")(function*(replyTo: string) {
  const target = parseReplyTo(replyTo)
  if (target._tag === "invalid") return yield* Effect.fail(new TaskRefused({ detail: `reply_to: ${target.why}` }))
  if (target._tag === "chat") {
    const org = yield* (yield* OrgConfig).snapshot.pipe(Effect.mapError((e) => new TaskRefused({ detail: `reply_to ${replyTo}: ${e.message}` })))
    if (!chatFor(org, target)) {
      return yield* Effect.fail(new TaskRefused({
        detail: `reply_to ${replyTo}: org.toml maps no ${target.provider} channel ${target.channel} — add a [[chat.channel]] with id = "${target.channel}" under a [[chat]] provider = "${target.provider}"`
      }))
    }
  }
  if (target._tag === "task" && !(yield* (yield* TaskStore).get(target.taskId))) {
    return yield* Effect.fail(new TaskRefused({ detail: `reply_to ${replyTo}: no such task — list them: roster task list` }))
  }
  return replyTo.trim()
})
