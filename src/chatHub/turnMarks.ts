import { Duration, Effect, FiberHandle, Queue, type Scope } from "effect"
import type { ChatClients } from "../chat/ChatClients.js"
import type { TurnMark } from "../chat/marks.js"
import type { ChatRule } from "../config/schema.js"
import type { ChatPlace } from "../contract/origin.js"
import type { TurnEnd } from "../session/sessionRequest.js"
import type { SessionMessage } from "../session/turnContext.js"

/** Discord shows typing for ten seconds after each call: renewed a little sooner. */
const TYPING_EVERY = Duration.seconds(8)

/** What a channel's messages show of their turns. */
export interface TurnMarks {
  readonly start: (message: SessionMessage) => Effect.Effect<void>
  readonly end: (end: TurnEnd) => Effect.Effect<void>
}

const logged = (what: string, place: ChatPlace) => <E extends { readonly message: string }>(e: E) =>
  Effect.logWarning(`chat ${place.provider}:${place.channel}: ${what}: ${e.message}`)

/**
 * A channel's turn marks (`[[chat]] reactions`): the message a turn serves is marked heard when
 * its turn starts and answered or unanswered when it ends, and on Discord the typing indicator
 * runs meanwhile. The marks are made one at a time, in order, by a fiber of the hub's scope — a
 * session never waits on a reaction, and a turn's last mark outlives its session — and a mark that
 * fails is logged: a reaction is never worth a turn.
 */
export const turnMarks = (chat: ChatRule, clients: ChatClients["Type"]): Effect.Effect<TurnMarks, never, Scope.Scope> =>
  Effect.gen(function*() {
    if (!chat.reactions) return { start: () => Effect.void, end: () => Effect.void }
    const marks = yield* Queue.unbounded<Effect.Effect<void>>()
    yield* Effect.forkScoped(Effect.forever(Effect.flatten(Queue.take(marks))))
    const typing = yield* FiberHandle.make<void, never>()
    const mark = (m: SessionMessage, to: TurnMark, from?: TurnMark) =>
      m.place === undefined ? Effect.void : Queue.offer(marks, clients.mark(m.place, m.messageId, to, from).pipe(Effect.catchAll(logged(`marking message ${m.messageId} ${to}`, m.place))))
    const typeIn = (place: ChatPlace) =>
      clients.typing(place).pipe(
        Effect.zipRight(Effect.sleep(TYPING_EVERY)),
        Effect.forever,
        Effect.catchAll(logged("the typing indicator", place))
      )
    return {
      start: (m) =>
        Effect.gen(function*() {
          yield* mark(m, "heard")
          if (m.place?.provider === "discord") yield* FiberHandle.run(typing, typeIn(m.place))
        }),
      end: (end) =>
        Effect.gen(function*() {
          yield* FiberHandle.clear(typing)
          if (end.message) yield* mark(end.message, end.delivered && !end.failed ? "answered" : "unanswered", "heard")
        })
    } satisfies TurnMarks
  })
