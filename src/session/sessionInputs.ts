import { Effect, Queue } from "effect"
import { watchInbox } from "./inbox.js"
import type { RunnerInput } from "./sessionTurns.js"
import type { SessionRequest } from "./sessionRequest.js"

/**
 * Everything a session's turns wait on, onto one queue (each a fiber of the session's scope):
 * pi's stdout ending, the inbox's messages, the person's aborts, and task answers sent to this
 * session. The inbox reader is returned: the session stops it before handing back what it took.
 */
export const feedInputs = (
  req: SessionRequest,
  runId: string,
  stdoutEnded: Effect.Effect<void>,
  inputs: Queue.Queue<RunnerInput>,
  note: (text: string) => Effect.Effect<void>
) =>
  Effect.gen(function*() {
    yield* stdoutEnded.pipe(Effect.zipRight(inputs.offer({ _tag: "died" })), Effect.forkScoped)
    // A message is taken and queued in one step that an interrupt cannot split, so none is lost between the two.
    const reader = yield* Effect.forever(Effect.uninterruptibleMask((restore) =>
      restore(req.inbox.take).pipe(Effect.flatMap((message) => inputs.offer({ _tag: "msg", message })))
    )).pipe(
      Effect.catchAll(() => inputs.offer({ _tag: "closed" })),
      Effect.forkScoped
    )
    if (req.controls) yield* Effect.forever(Queue.take(req.controls).pipe(Effect.zipRight(inputs.offer({ _tag: "abort" })))).pipe(Effect.forkScoped)
    // A task's answer sent to this session (reply_to talk:<run-id>) arrives as a turn of its own.
    yield* watchInbox(runId, (message) =>
      note(`${message.author} answered: delivered here as a message`).pipe(Effect.zipRight(inputs.offer({ _tag: "msg", message })))).pipe(
        Effect.catchAllCause((c) => Effect.logError(`session ${runId}: its inbox could not be read`, c)),
        Effect.forkScoped
      )
    return reader
  })
