import { Effect, Schedule } from "effect"
import type { ChatListenerStatus } from "../contract/chatStatus.js"
import type { ChatEvent } from "./admit.js"
import type { CardPress } from "./cardPress.js"

/** Where a listener hands what it hears: each message (with the bot's own id), and how its connection stands. */
export interface ListenerSink {
  readonly event: (e: ChatEvent, botId: string) => Effect.Effect<void>
  /** A button pressed on one of roster's cards (a held request's Approve / Deny). */
  readonly press?: (p: CardPress) => Effect.Effect<void>
  readonly state: (state: ChatListenerStatus["state"], detail: string | null) => Effect.Effect<void>
}

/**
 * A listener's connection held for as long as its scope: a start that fails is said ("failing",
 * with why) and tried again, 1 s doubling to at most a minute apart; a defect is said as
 * "stopped" and the listener waits, so a broken listener never takes the daemon down.
 */
export const keepConnected = (connect: Effect.Effect<never, { readonly message: string }>, sink: ListenerSink): Effect.Effect<never> =>
  connect.pipe(
    Effect.tapError((e) => sink.state("failing", e.message)),
    Effect.retry(Schedule.exponential("1 second", 2).pipe(Schedule.union(Schedule.spaced("60 seconds")))),
    Effect.orDie,
    Effect.catchAllDefect((d) => sink.state("stopped", String(d)).pipe(Effect.zipRight(Effect.never)))
  )
