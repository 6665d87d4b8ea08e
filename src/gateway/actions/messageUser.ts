import { Clock, Effect, Schema } from "effect"
import { Paths, layout } from "../../config/Paths.js"
import { runFiles } from "../../contract/runFiles.js"
import { Files } from "../../fs/Files.js"
import type { ActionAnswer, BoxCaller } from "./actionTypes.js"
import { chatSessionPlace, postAsWorker } from "./chat/sendAction.js"

const MAX_TEXT = 8000

const MessageUser = Schema.parseJson(Schema.Struct({ text: Schema.String }))

/**
 * message_user: the box's words for the person who started the run, recorded beside its outputs
 * (and, in a chat session, posted to its thread).
 */
export const messageUser = (caller: BoxCaller, body: string) =>
  Effect.gen(function*() {
    const text = Schema.decodeUnknownOption(MessageUser)(body).pipe((o) => (o._tag === "Some" ? o.value.text : undefined))
    if (text === undefined || text.trim() === "" || text.length > MAX_TEXT) {
      return { status: 400, body: { ok: false, error: `text must be a non-empty string of at most ${MAX_TEXT} characters` } } satisfies ActionAnswer
    }
    const runDir = layout(yield* Paths).runDir(caller.worker, caller.runId)
    const time = new Date(yield* Clock.currentTimeMillis).toISOString()
    const record = { time, run_id: caller.runId, task_id: caller.taskId, worker: caller.worker, text }
    const written = yield* (yield* Files).append(runFiles(runDir).messages, `${JSON.stringify(record)}\n`).pipe(Effect.either)
    if (written._tag === "Left") {
      yield* Effect.logWarning(`gateway: a message_user of run ${caller.runId} could not be recorded: ${written.left.message}`)
      return { status: 500, body: { ok: false, error: "the message could not be recorded" } } satisfies ActionAnswer
    }
    // In a chat session the person is in the thread: the message is posted there, and only a
    // posted one counts as said (a failed post is the tool's error, and the turn's notice follows).
    const place = yield* chatSessionPlace(caller)
    if (place !== undefined) return yield* postAsWorker(caller, place, text, "message_user")
    return { status: 200, body: { ok: true } } satisfies ActionAnswer
  })
