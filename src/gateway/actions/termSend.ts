import { Effect } from "effect"
import { readRunContext } from "../../run/runContext.js"
import type { ActionAnswer, BoxCaller } from "./actionTypes.js"
import { messageUser } from "./messageUser.js"

/**
 * term_send: a talk session's word to its person at the terminal (roster talk, the web's Talk),
 * kept with the run's messages. The session shows it as pi calls the tool; the gateway records it,
 * and refuses it from any run that is not a talk session (the tool is registered only there, but a
 * box can post what it likes).
 */
export const termSend = (caller: BoxCaller, body: string) =>
  Effect.gen(function*() {
    const surface = (yield* readRunContext(caller.worker, caller.runId))?.surface
    if (surface !== "term-session" && surface !== "web-session") {
      return { status: 403, body: { ok: false, error: "term_send is a talk session's (roster talk, the web's Talk); this run has no terminal to speak to: use message_user" } } satisfies ActionAnswer
    }
    return yield* messageUser(caller, body)
  })
