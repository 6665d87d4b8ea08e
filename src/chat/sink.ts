import type { Effect } from "effect"
import type { ChatListenerStatus } from "../contract/chatStatus.js"
import type { ChatEvent } from "./admit.js"

/** Where a listener hands what it hears: each message (with the bot's own id), and how its connection stands. */
export interface ListenerSink {
  readonly event: (e: ChatEvent, botId: string) => Effect.Effect<void>
  readonly state: (state: ChatListenerStatus["state"], detail: string | null) => Effect.Effect<void>
}
