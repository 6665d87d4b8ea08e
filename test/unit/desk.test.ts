import { describe, expect, it } from "@effect/vitest"
import { Effect, Logger, Mailbox, Ref, Schema } from "effect"
import type { TurnMarks } from "../../src/chatHub/turnMarks.js"
import { channelSpent, deskEnv } from "../../src/chatHub/ChatHub.js"
import { ChatClients } from "../../src/chat/ChatClients.js"
import { Chat } from "../../src/config/schema.js"
import { Runner } from "../../src/runner/Runner.js"
import type { Supervisor } from "../../src/supervisor/Supervisor.js"
import { RunnerCalls } from "../../src/testing.js"
import { type ChatMessage, makeDesk } from "../../src/chatHub/desk.js"
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
    const pasts: Array<string> = []
    let sessions = 0
    return Effect.gen(function*() {
      const desk = yield* makeDesk({
        runSession: (inbox: Mailbox.ReadonlyMailbox<SessionMessage>) =>
          ++sessions === 1
            ? Effect.die(new Error("session exploded"))
            : Effect.gen(function*() {
              const m = yield* inbox.take
              served.push(m.text)
              pasts.push((m.history ?? []).map((h) => `${h.text}${h.waited ? ` (${h.waited})` : ""}`).join(","))
              const outcome: SessionOutcome = { runId: "r2", runDir: "/tmp/r2", reason: "idle", clean: true, turns: 1, unserved: [], ceilingMin: 240 }
              return outcome
            }),
        onEnd: () => Effect.void,
        onFail: (text) => Effect.sync(() => void failures.push(text)),
        onReady: () => Effect.void
      })
      yield* desk.offer(message("first"))
      yield* settle(() => failures.length > 0)
      expect(failures).toEqual(["roster failed unexpectedly (the daemon's log says why) — 1 message not yet answered waits for the next session (your next message starts it)"])
      expect(logged.some((l) => l.includes("chat: a session failed unexpectedly") && l.includes("session exploded"))).toBe(true)
      yield* desk.offer(message("second"))
      yield* settle(() => served.length > 0)
      // The message the dead session never answered is the next session's history, not a turn replayed after the fact.
      expect(served).toEqual(["second"])
      expect(pasts).toEqual(["first (here)"])
      expect(sessions).toBe(2)
    }).pipe(Effect.scoped, Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
  })
})

describe("a chat channel's desk: what a failed session had not answered", () => {
  it.live("waits for the next session, which the next message starts, and the channel is told how many wait — none is dropped", () => {
    const failures: Array<string> = []
    const served: Array<string> = []
    const pasts: Array<string> = []
    let sessions = 0
    return Effect.gen(function*() {
      const desk = yield* makeDesk({
        runSession: (inbox: Mailbox.ReadonlyMailbox<SessionMessage>) =>
          ++sessions === 1
            // Its box never starts: it fails having taken nothing, a second message queued behind the first.
            ? Effect.sleep("100 millis").pipe(Effect.zipRight(Effect.fail({ message: "the box image is missing" })))
            : Effect.gen(function*() {
              let turns = 0
              for (;;) {
                const m = yield* inbox.take.pipe(Effect.timeout("200 millis"), Effect.option)
                if (m._tag === "None") break
                served.push(m.value.text)
                if (m.value.history) pasts.push(m.value.history.map((h) => `${h.author} ${h.text} ${h.waited}`).join(","))
                turns++
              }
              const outcome: SessionOutcome = { runId: "r2", runDir: "/tmp/r2", reason: "idle", clean: true, turns, unserved: [], ceilingMin: 240 }
              return outcome
            }),
        onEnd: () => Effect.void,
        onFail: (text) => Effect.sync(() => void failures.push(text)),
        onReady: () => Effect.void
      })
      yield* desk.offer(message("first"))
      yield* desk.offer(message("second"))
      yield* settle(() => failures.length > 0)
      expect(failures).toEqual(["the box image is missing — 2 messages not yet answered wait for the next session (your next message starts it)"])
      yield* desk.offer(message("third"))
      yield* settle(() => served.length >= 1)
      expect(served).toEqual(["third"])
      expect(pasts).toEqual(["U1 first here,U1 second here"])
    }).pipe(Effect.scoped)
  })
})

describe("a chat channel's sessions through the Runner (its test layer: no engine)", () => {
  it.live("a message starts a chat session of the channel's worker, holding its box slot, with the channel's limits and who asked; the next message is its next turn", () => {
    const held: Array<string> = []
    const supervisor = {
      holdSlot: (worker: string, key: string) =>
        Effect.sync(() => void held.push(`${worker} ${key}`))
    } as unknown as Supervisor["Type"]
    const chat = Schema.decodeUnknownSync(Chat)({ provider: "slack", connection: "slack", channel: [{ id: "C0TEAM", worker: "alice", idle_min: 5, ceiling_min: 20 }] })
    const channel = chat.channel[0]!
    const ready: Array<string> = []
    const marked: Array<string> = []
    const marks: TurnMarks = {
      start: (m) => Effect.sync(() => void marked.push(`heard ${m.messageId}${m.history ? ` after ${m.history.map((h) => `${h.author}${h.speaker ? `(${h.speaker})` : ""}`).join(",")}` : ""}`)),
      end: (e) => Effect.sync(() => void marked.push(`${e.delivered && !e.failed ? "answered" : "unanswered"} ${e.message?.messageId}`))
    }
    return Effect.gen(function*() {
      const runner = yield* Runner
      const env = deskEnv(chat, channel, supervisor, runner, marks, yield* ChatClients.pipe(Effect.provide(ChatClients.layerTest([]))))
      const desk = yield* makeDesk({
        ...env,
        // The thread's past as the service gives it: the session's first message carries it, the next does not.
        past: (m) => Effect.succeed([{ author: "U0BEN", text: `before ${m.messageId}` }, { author: "UROSTERBOT", text: "my earlier answer", speaker: "you" as const }]),
        onReady: (runId) => Effect.sync(() => void ready.push(runId)),
        onEnd: () => Effect.void
      })
      const first: ChatMessage = { text: "hello", author: "U0ANNA", provider: "slack", messageId: "1.1", place: { provider: "slack", channel: "C0TEAM", thread: "1.1" } }
      yield* desk.offer(first)
      yield* desk.offer({ ...first, text: "and then", messageId: "1.2" })
      yield* settle(() => ready.length > 0)
      const calls = yield* Ref.get(yield* RunnerCalls)
      expect(calls).toHaveLength(1)
      const req = calls[0]!._tag === "session" ? calls[0]!.req : undefined
      expect(req).toMatchObject({
        worker: "alice",
        surface: "chat-session",
        chat: first.place,
        origin: { _tag: "chat", provider: "slack", channel: "C0TEAM", author: "U0ANNA" },
        limits: { idleSecs: 300, ceilingMin: 20 }
      })
      expect(held).toEqual(["alice chat:slack:C0TEAM"])
      // Each message is marked heard as its turn starts and answered as it ends, in turn order.
      yield* settle(() => marked.length === 4)
      expect(marked).toEqual(["heard 1.1 after U0BEN,UROSTERBOT(you)", "answered 1.1", "heard 1.2", "answered 1.2"])
    }).pipe(Effect.scoped, Effect.provide(Runner.layerTest()))
  })

  it.live("a channel whose day's budget is spent starts no box: the message is answered with what was spent and when it starts again", () => {
    const held: Array<string> = []
    const supervisor = { holdSlot: (worker: string) => Effect.sync(() => void held.push(worker)) } as unknown as Supervisor["Type"]
    const chat = Schema.decodeUnknownSync(Chat)({ provider: "slack", connection: "slack", channel: [{ id: "C0TEAM", worker: "alice", budget_usd_day: 2 }] })
    const channel = chat.channel[0]!
    const asked: Array<string> = []
    const marks: TurnMarks = { start: () => Effect.void, end: () => Effect.void }
    return Effect.gen(function*() {
      const runner = yield* Runner
      const spent = (key: string) => Effect.sync(() => (asked.push(key), 2.5))
      const env = deskEnv(chat, channel, supervisor, runner, marks, yield* ChatClients.pipe(Effect.provide(ChatClients.layerTest([]))), spent)
      const failed: Array<string> = []
      const desk = yield* makeDesk({ ...env, past: () => Effect.succeed(undefined), onFail: (message) => Effect.sync(() => void failed.push(message)), onEnd: () => Effect.void })
      yield* desk.offer({ text: "hello", author: "U0ANNA", provider: "slack", messageId: "1.1", place: { provider: "slack", channel: "C0TEAM", thread: "1.1" } })
      yield* settle(() => failed.length > 0)
      expect(failed).toEqual([
        "slack channel C0TEAM has spent $2.5000 (estimated) of its budget_usd_day of $2.0000 today; it starts again at 00:00 UTC — to allow more, raise budget_usd_day of its [[chat.channel]] in org.toml" +
        " — 1 message not yet answered waits for the next session (your next message starts it)"
      ])
      expect(asked).toEqual(["slack:c0team"])
      expect(held).toEqual([])
      expect(yield* Ref.get(yield* RunnerCalls)).toEqual([])
      expect(channelSpent("slack", "C0TEAM", 2, 1.99)).toBeUndefined()
    }).pipe(Effect.scoped, Effect.provide(Runner.layerTest()))
  })
})
