import { Effect } from "effect"
import type { ChatClients } from "../chat/ChatClients.js"
import type { ChatRule } from "../config/schema.js"
import type { ChatPlace } from "../contract/origin.js"
import { unsentNotice } from "./notices.js"

/** Posts roster's own line in a thread; a failed post is logged (the service may be down), never fatal. */
export const say = (clients: ChatClients["Type"], place: ChatPlace, text: string) =>
  clients.post(place, text).pipe(
    Effect.catchAll((e) => Effect.logWarning(`chat: ${e.message}`)),
    Effect.asVoid
  )

/** A turn's answer no send tool carried, handled as `[[chat]] unsent` says: a notice with its start, the text itself, or nothing. */
export const handleUnsent = (clients: ChatClients["Type"], chat: ChatRule, worker: string, place: ChatPlace, text: string) =>
  Effect.gen(function*() {
    if (chat.unsent === "notice") yield* say(clients, place, unsentNotice(worker, text))
    if (chat.unsent === "post") yield* say(clients, place, text)
    return chat.unsent
  })
