import { Effect } from "effect"
import type { ChatClients } from "../chat/ChatClients.js"
import type { ChatRule } from "../config/schema.js"
import type { ChatPlace } from "../contract/origin.js"
import type { UnsentOutcome } from "../session/sessionRequest.js"
import { unsentNotice } from "./notices.js"

/** Posts a line in a thread: whether it was posted; a failed post is logged (the service may be down), never fatal. */
export const posted = (clients: ChatClients["Type"], place: ChatPlace, text: string) =>
  clients.post(place, text).pipe(
    Effect.as(true),
    Effect.catchAll((e) => Effect.logWarning(`chat: ${e.message}`).pipe(Effect.as(false)))
  )

/** Posts roster's own line in a thread; a failed post is logged (the service may be down), never fatal. */
export const say = (clients: ChatClients["Type"], place: ChatPlace, text: string) => Effect.asVoid(posted(clients, place, text))

/**
 * A turn's answer no send tool carried, handled as `[[chat]] unsent` says: a notice with its start, the
 * text itself, or nothing — and whether what was meant to reach the thread did (a failed post is no answer).
 */
export const handleUnsent = (clients: ChatClients["Type"], chat: ChatRule, worker: string, place: ChatPlace, text: string) =>
  Effect.gen(function*() {
    const ok = chat.unsent === "notice"
      ? yield* posted(clients, place, unsentNotice(worker, text))
      : chat.unsent === "post"
      ? yield* posted(clients, place, text)
      : true
    return { handled: chat.unsent, posted: ok } satisfies UnsentOutcome
  })
