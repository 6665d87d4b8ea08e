import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Mailbox, Schema } from "effect"
import { deskEnv } from "../../src/chatHub/ChatHub.js"
import type { ChatMessage } from "../../src/chatHub/desk.js"
import type { TurnMarks } from "../../src/chatHub/turnMarks.js"
import { ChatClients } from "../../src/chat/ChatClients.js"
import { Chat } from "../../src/config/schema.js"
import type { ChatPlace } from "../../src/contract/origin.js"
import type { Runner } from "../../src/runner/Runner.js"
import type { SessionOutcome } from "../../src/session/runSession.js"
import type { SessionMessage } from "../../src/session/turnContext.js"
import type { Supervisor } from "../../src/supervisor/Supervisor.js"

describe("a chat message its session could not take (issue 64.5)", () => {
  it.effect("is said in its own thread, naming the worker and why, with what to do, and marked unanswered", () => {
    const posted: Array<{ readonly place: ChatPlace; readonly text: string }> = []
    const ends: Array<Parameters<TurnMarks["end"]>[0]> = []
    const chat = Schema.decodeUnknownSync(Chat)({ provider: "slack", connection: "slack", channel: [{ id: "C0TEAM", worker: "alice" }] })
    const first: ChatMessage = { text: "hello", author: "U0ANNA", provider: "slack", messageId: "1.1", place: { provider: "slack", channel: "C0TEAM", thread: "1.1" } }
    const second: SessionMessage = { text: "and this", author: "U0CARA", provider: "slack", messageId: "1.5", place: { provider: "slack", channel: "C0TEAM", thread: "1.1" } }
    const outcome: SessionOutcome = { runId: "r1", runDir: "/tmp/r1", reason: "idle", clean: true, turns: 1, unserved: [], ceilingMin: 240 }
    // The Runner's session as the daemon's is, up to the point that matters: it skips the second message, saying why.
    const runner = {
      session: (req: Parameters<Runner["Type"]["session"]>[0]) =>
        (req.onSkipped?.(second, "its run context could not be saved (disk full)") ?? Effect.void).pipe(Effect.as(outcome))
    } as unknown as Runner["Type"]
    const supervisor = { holdSlot: () => Effect.void } as unknown as Supervisor["Type"]
    return Effect.gen(function*() {
      const clients = yield* ChatClients.pipe(Effect.provide(ChatClients.layerTest(posted)))
      const env = deskEnv(chat, chat.channel[0]!, supervisor, runner, { start: () => Effect.void, end: (e) => Effect.sync(() => void ends.push(e)) }, clients)
      const inbox = yield* Mailbox.make<SessionMessage>()
      const ran = yield* env.runSession(inbox, first, () => Effect.void)
      expect(ran).toEqual(outcome)
      expect(posted).toEqual([{ place: second.place, text: "[roster] alice could not take this message (its run context could not be saved (disk full)): send it again" }])
      expect(ends).toEqual([{ delivered: false, failed: true, message: second }])
    }).pipe(Effect.provide(NodeContext.layer))
  })
})
