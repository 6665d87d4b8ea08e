import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Logger, type Mailbox, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { bounded, fileBacklog, type Waiting } from "../../src/chatHub/backlog.js"
import { deskEnv } from "../../src/chatHub/ChatHub.js"
import { type ChatMessage, makeDesk } from "../../src/chatHub/desk.js"
import { ChatClients } from "../../src/chat/ChatClients.js"
import { Chat } from "../../src/config/schema.js"
import type { ChatPlace } from "../../src/contract/origin.js"
import type { Runner } from "../../src/runner/Runner.js"
import type { Supervisor } from "../../src/supervisor/Supervisor.js"
import type { SessionOutcome } from "../../src/session/runSession.js"
import { compileTurn, type SessionMessage } from "../../src/session/turnContext.js"
import { Files } from "../../src/fs/Files.js"

/** Waits up to 2 s for `done`; the test's expectations then say what did not happen. */
const settle = (done: () => boolean) =>
  Effect.gen(function*() {
    for (let i = 0; i < 100 && !done(); i++) yield* Effect.sleep("20 millis")
  })

const inThread = (thread: string, text: string, author = "U0ANNA"): ChatMessage =>
  ({ text, author, provider: "slack", messageId: `${thread}-${text}`, place: { provider: "slack", channel: "C0TEAM", thread } })

const tempFile = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "roster-backlog-")), "chat", "waiting", "slack-c0team.json")

const kept = (file: string) =>
  fs.existsSync(file) ? (JSON.parse(fs.readFileSync(file, "utf8")) as { messages: Array<{ text: string }> }).messages.map((m) => m.text) : []

/** A session that cannot start (its box image missing, its budget spent): it fails having served nothing. */
const cannotStart = () => Effect.fail({ message: "the box image is missing" })

/** A session that serves one message, recording it and the history its first turn was given. */
const serveOne = (seen: Array<SessionMessage>) => (inbox: Mailbox.ReadonlyMailbox<SessionMessage>) =>
  Effect.gen(function*() {
    seen.push(yield* inbox.take)
    const outcome: SessionOutcome = { runId: "r2", runDir: "/tmp/r2", reason: "idle", clean: true, turns: 1, unserved: [], ceilingMin: 240 }
    return outcome
  })

const noEnds = { onEnd: () => Effect.void, onReady: () => Effect.void }

describe("chat messages waiting for a channel's next session (issue 64.3)", () => {
  it.live("survive a restart of the daemon: kept on disk, then the next session's first turn has them as history (not turns), and they are no longer kept", () => {
    const file = tempFile()
    const failures: Array<string> = []
    const seen: Array<SessionMessage> = []
    return Effect.gen(function*() {
      // The daemon before its restart: two messages in thread 1.1 and one in 2.1 its sessions could not serve.
      yield* Effect.scoped(Effect.gen(function*() {
        const desk = yield* makeDesk({ ...noEnds, runSession: cannotStart, onFail: (t) => Effect.sync(() => void failures.push(t)), backlog: yield* fileBacklog(file, "chat slack:C0TEAM") })
        for (const m of [inThread("1.1", "first"), inThread("1.1", "second", "U0BEN"), inThread("2.1", "elsewhere")]) {
          yield* desk.offer(m)
          yield* settle(() => kept(file).includes(m.text))
        }
      }))
      expect(kept(file)).toEqual(["first", "second", "elsewhere"])
      expect(failures.at(-1)).toBe("the box image is missing — 3 messages not yet answered wait for the next session (your next message starts it)")
      // The daemon after it: a new desk over the same file. The service's past of thread 1.1 shows "first" already.
      yield* Effect.scoped(Effect.gen(function*() {
        const desk = yield* makeDesk({
          ...noEnds, runSession: serveOne(seen), onFail: () => Effect.void, backlog: yield* fileBacklog(file, "chat slack:C0TEAM"),
          past: () => Effect.succeed([{ author: "U0ANNA", text: "first" }, { author: "UROSTERBOT", text: "an earlier answer", speaker: "you" as const }])
        })
        yield* desk.offer(inThread("1.1", "now"))
        yield* settle(() => seen.length > 0 && !fs.existsSync(file))
      }))
      expect(seen.map((m) => m.text)).toEqual(["now"])
      expect(seen[0]!.history).toEqual([
        { author: "U0ANNA", text: "first", waited: "here" },
        { author: "UROSTERBOT", text: "an earlier answer", speaker: "you" },
        { author: "U0BEN", text: "second", waited: "here" },
        { author: "U0ANNA", text: "elsewhere", waited: "another thread" }
      ])
      expect(fs.existsSync(file)).toBe(false)
      // As the worker reads it: each one said to be unanswered, and where.
      const trace = path.join(path.dirname(file), "turns.jsonl")
      const input = yield* compileTurn(seen[0]!, 1, trace).pipe(Effect.provide(Files.layer))
      expect(input).toContain("- U0ANNA (not answered: it waited for this session): first\n")
      expect(input).toContain("- U0ANNA (not answered, in another thread of this channel: it waited for this session): elsewhere\n")
    }).pipe(Effect.provide(NodeContext.layer))
  })

  it.live("are bounded per thread: past ten, the oldest are dropped and their thread is told which (the notice quotes them)", () => {
    const file = tempFile()
    const posted: Array<{ readonly place: ChatPlace; readonly text: string }> = []
    const chat = Schema.decodeUnknownSync(Chat)({ provider: "slack", connection: "slack", channel: [{ id: "C0TEAM", worker: "alice" }] })
    return Effect.gen(function*() {
      const clients = yield* ChatClients.pipe(Effect.provide(ChatClients.layerTest(posted)))
      const env = deskEnv(chat, chat.channel[0]!, {} as Supervisor["Type"], {} as Runner["Type"], { start: () => Effect.void, end: () => Effect.void }, clients, undefined, yield* fileBacklog(file, "chat slack:C0TEAM"))
      const desk = yield* makeDesk({ ...env, ...noEnds, runSession: cannotStart, onFail: () => Effect.void, past: () => Effect.succeed(undefined) })
      for (let i = 1; i <= 12; i++) {
        yield* desk.offer(inThread("1.1", `message ${i}`))
        yield* settle(() => kept(file).includes(`message ${i}`))
      }
      yield* desk.offer(inThread("2.1", "another thread's"))
      yield* settle(() => kept(file).includes("another thread's"))
      expect(kept(file)).toEqual([...Array.from({ length: 10 }, (_, i) => `message ${i + 3}`), "another thread's"])
      const told = posted.filter((p) => p.text.includes("dropped"))
      expect(told.map((p) => p.place.thread)).toEqual(["1.1", "1.1"])
      expect(told[0]!.text).toBe("[roster] only the latest 10 messages in a thread wait for alice's next session; this one was dropped — send again what still matters:\n> U0ANNA: message 1")
      expect(told[1]!.text).toContain("> U0ANNA: message 2")
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer))
  })

  it.effect("one that cannot be read is put aside as it was and said where; the channel starts with none waiting", () => {
    const file = tempFile()
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, "{\"messages\": [{\"text\": 7}")
    const logged: Array<string> = []
    const logger = Logger.make(({ message }) => void logged.push(String(message)))
    return Effect.gen(function*() {
      const backlog = yield* fileBacklog(file, "chat slack:C0TEAM")
      expect(yield* backlog.load).toEqual([])
      const aside = fs.readdirSync(path.dirname(file)).filter((f) => f.startsWith("slack-c0team.json.unreadable-"))
      expect(aside).toHaveLength(1)
      expect(fs.readFileSync(path.join(path.dirname(file), aside[0]!), "utf8")).toBe("{\"messages\": [{\"text\": 7}")
      expect(logged.some((l) => l.includes("chat slack:C0TEAM: the messages waiting for its next session could not be read") && l.includes(`put aside at ${path.join(path.dirname(file), aside[0]!)}`))).toBe(true)
    }).pipe(Effect.provide(NodeContext.layer), Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
  })

  it("the bound keeps each thread's newest, in the order they came", () => {
    const w = (thread: string, text: string): Waiting => ({ ...inThread(thread, text), since: "2026-12-07T00:00:00Z" })
    const { kept: k, dropped } = bounded([w("a", "1"), w("b", "x"), w("a", "2"), w("a", "3")], 2)
    expect(k.map((m) => m.text)).toEqual(["x", "2", "3"])
    expect(dropped.map((m) => m.text)).toEqual(["1"])
  })
})
