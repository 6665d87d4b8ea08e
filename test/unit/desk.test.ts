import { describe, expect, it } from "@effect/vitest"
import { Effect, Logger, Mailbox } from "effect"
import { type ChatMessage, makeDesk } from "../../src/chat/desk.js"
import type { SessionOutcome } from "../../src/session/runSession.js"
import type { SessionMessage } from "../../src/session/turnContext.js"

/** Waits up to 2 s for `done`; the test's expectations then say what did not happen. */
const settle = (done: () => boolean) =>
  Effect.gen(function*() {
    for (let i = 0; i < 100 && !done(); i++) yield* Effect.sleep("20 millis")
  })

const place = { provider: "slack", channel: "C1" } as const
const message = (text: string): ChatMessage => ({ text, author: "U1", provider: "slack", messageId: text, place })

describe("a chat channel's desk (its sessions faked)", () => {
  it.live("a session that dies of a bug ends, the channel is told, and the next message starts a session (the channel never goes deaf)", () => {
    const logged: Array<string> = []
    const logger = Logger.make(({ cause, message }) => void logged.push(`${String(message)} ${cause._tag === "Empty" ? "" : String(cause)}`))
    const failures: Array<string> = []
    const served: Array<string> = []
    let sessions = 0
    return Effect.gen(function*() {
      const desk = yield* makeDesk({
        runSession: (inbox: Mailbox.ReadonlyMailbox<SessionMessage>) =>
          ++sessions === 1
            ? Effect.die(new Error("session exploded"))
            : Effect.gen(function*() {
              const m = yield* inbox.take
              served.push(m.text)
              const outcome: SessionOutcome = { runId: "r2", runDir: "/tmp/r2", reason: "idle", clean: true, turns: 1, unserved: [] }
              return outcome
            }),
        onEnd: () => Effect.void,
        onFail: (text) => Effect.sync(() => void failures.push(text)),
        onReady: () => Effect.void
      })
      yield* desk.offer(message("first"))
      yield* settle(() => failures.length > 0)
      expect(failures).toEqual(["roster failed unexpectedly (the daemon's log says why)"])
      expect(logged.some((l) => l.includes("chat: a session failed unexpectedly") && l.includes("session exploded"))).toBe(true)
      yield* desk.offer(message("second"))
      yield* settle(() => served.length > 0)
      expect(served).toEqual(["second"])
      expect(sessions).toBe(2)
    }).pipe(Effect.scoped, Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
  })
})
