import { Effect, Schema } from "effect"
import { OrgConfig } from "../config/OrgConfig.js"
import { chatFor } from "../config/schema.js"
import { parseReplyTo, type ReplyTarget } from "../contract/origin.js"
import { ownPlaces, placeKey } from "../contract/replyPlaces.js"
import type { RunContext } from "../contract/runContext.js"
import { TaskStore } from "../task/TaskStore.js"
import { liveSession } from "./liveSession.js"

/** A reply target refused: a form roster does not know, a place that is not there, or (for a run) not its own. */
export class ReplyRefused extends Schema.TaggedError<ReplyRefused>()("ReplyRefused", {
  detail: Schema.String,
  /** A run named a place that is not one of its own (a 403, not a 400). */
  notOwn: Schema.Boolean
}) {
  override get message() {
    return this.detail
  }
}

/** Who names the place: a person (any place that exists), or a run (only its own places; its saved context says which). */
export type ReplyAsker =
  | { readonly _tag: "person" }
  | { readonly _tag: "run"; readonly runId: string; readonly context: RunContext | undefined }

export const PERSON_ASKS: ReplyAsker = { _tag: "person" }

const refused = (detail: string, notOwn = false) => Effect.fail(new ReplyRefused({ detail, notOwn }))

/** A place that is there now: a task that exists, a live talk session, a chat channel org.toml maps. */
const placeExists = (replyTo: string, target: ReplyTarget) =>
  Effect.gen(function*() {
    switch (target._tag) {
      case "chat": {
        const org = yield* (yield* OrgConfig).snapshot.pipe(Effect.catchAll((e) => refused(`reply_to ${replyTo}: ${e.message}`)))
        if (!chatFor(org, target)) {
          return yield* refused(
            `reply_to ${replyTo}: org.toml maps no ${target.provider} channel ${target.channel} — add a [[chat.channel]] with id = "${target.channel}" under a [[chat]] provider = "${target.provider}"`
          )
        }
        return
      }
      case "task":
        if (!(yield* (yield* TaskStore).get(target.taskId))) {
          return yield* refused(`reply_to ${replyTo}: no such task — list them: roster task list`)
        }
        return
      case "talk": {
        const session = yield* liveSession(target.runId)
        if (!session.live) return yield* refused(`reply_to ${replyTo}: ${session.why} — a reply goes to a live conversation (roster talk, the web's Talk)`)
        return
      }
      case "none":
        return
    }
  })

/**
 * A reply target checked before a task is queued and again before its answer is delivered: a
 * form roster knows, a place that exists now, and — when a run names it (set_tasks, a delivery
 * of what a worker queued) — one of that run's own places (see ownPlaces). The one check of
 * "may this answer go there" for set_tasks, the control API, the CLI and delivery.
 */
export const checkReplyTo = Effect.fn("reply.checkReplyTo")(function*(replyTo: string, asker: ReplyAsker) {
  const target = parseReplyTo(replyTo)
  if (target._tag === "invalid") return yield* refused(`reply_to: ${target.why}`)
  if (asker._tag === "run") {
    if (asker.context === undefined) {
      return yield* refused(`reply_to ${replyTo}: run ${asker.runId} has no saved context, so it has no place of its own to reply to`, true)
    }
    const own = ownPlaces(asker.context)
    if (!own.includes(placeKey(target))) {
      return yield* refused(
        `reply_to ${replyTo}: a worker replies only to its own places (${own.join(", ")}), never one it names`,
        true
      )
    }
  }
  yield* placeExists(replyTo, target)
  return placeKey(target)
})
