import { SystemError } from "@effect/platform/Error"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Mailbox, Queue, TestClock } from "effect"
import * as fs from "node:fs"
import { layout } from "../../src/config/Paths.js"
import { DockerFake, type FakeContainer } from "../../src/docker/DockerTest.js"
import { RunLog } from "../../src/run/RunLog.js"
import { runSession } from "../../src/session/runSession.js"
import type { SessionMessage } from "../../src/session/turnContext.js"
import { eventually, tempPaths, unitLayer, writeFixture } from "../support/harness.js"

const msg = (text: string): SessionMessage => ({ text, author: "you", provider: "terminal", messageId: text })
const line = (v: unknown) => JSON.stringify(v)
const assistant = (text: string) => line({ type: "message_end", message: { role: "assistant", content: [{ type: "text", text }], stopReason: "stop" } })
const END = [line({ type: "agent_end", messages: [], willRetry: false }), line({ type: "agent_settled", aborted: false })]

/** An rpc engine that starts a turn on each prompt and lets the test decide when it ends. */
const rpcEngine = () => ({
  hang: true,
  exitOnEof: true,
  onStdin: (l: string) => {
    const c = JSON.parse(l) as { type: string }
    return c.type === "prompt" ? [line({ type: "response", command: "prompt", success: true }), line({ type: "agent_start" })] : []
  }
})

const setup = (org = "") => {
  const paths = tempPaths()
  writeFixture({ paths, orgToml: org })
  return { paths, layer: unitLayer(paths, { docker: { script: rpcEngine } }) }
}

const box = Effect.gen(function*() {
  const fake = yield* DockerFake
  return [...fake.containers.values()].find((c) => c.state === "running")
})
/** What each prompt said after the Start preamble the first one carries (its surface, origin and memory). */
const prompts = (c: FakeContainer) =>
  c.stdin.map((s) => JSON.parse(s) as { type: string; message?: string }).filter((x) => x.type === "prompt")
    .map((x) => x.message?.replace(/^[\s\S]*\n## The first message\n/, ""))
const emit = (c: FakeContainer, ...lines: Array<string>) => c.stdout.offerAll(lines.map((l) => new TextEncoder().encode(`${l}\n`)))
const tokens = (paths: ReturnType<typeof tempPaths>) => fs.existsSync(layout(paths).identityDir) ? fs.readdirSync(layout(paths).identityDir) : []

describe("warm sessions (Docker test layer, TestClock)", () => {
  it.effect("a session of a channel mounts it, starts from its history, and adds each turn and reply to it", () => {
    const paths = tempPaths()
    writeFixture({ paths, orgToml: "", workers: ["alice", "bea"] })
    const layer = unitLayer(paths, { docker: { script: rpcEngine } })
    const files = layout(paths)
    const history = `${files.channelDir("ops")}/history.jsonl`
    const talk = (worker: string) =>
      Effect.gen(function*() {
        const inbox = yield* Mailbox.make<SessionMessage>()
        const fiber = yield* Effect.fork(runSession({ worker, inbox, surface: "term-session", channel: "ops" }))
        yield* inbox.offer(msg(`hello from a session of ${worker}`))
        const c = yield* eventually(box, "the box")
        yield* eventually(Effect.sync(() => prompts(c).length === 1), "the first prompt")
        yield* inbox.end
        yield* emit(c, assistant(`${worker} heard you`), ...END)
        const outcome = yield* Fiber.join(fiber)
        return { c, outcome }
      })
    return Effect.gen(function*() {
      const first = yield* talk("alice")
      expect(prompts(first.c)).toEqual(["hello from a session of alice"])
      expect(first.c.spec.HostConfig.Binds).toContain(`${files.channelDir("ops")}:/pihome/channel:ro`)
      expect(first.c.spec.HostConfig.Binds).toContain(`${files.channelStoreDir("alice", "ops")}:/pihome/channel/store`)
      expect(first.c.spec.Env).toContain("ROSTER_CHANNEL_DIR=/pihome/channel")
      expect(fs.existsSync(`${files.channelDir("ops")}/store`)).toBe(true)
      const lines = fs.readFileSync(history, "utf8").trim().split("\n").map((l) => JSON.parse(l) as { author: string; text: string; run_id: string; role: string })
      expect(lines.map((l) => [l.author, l.role, l.text])).toEqual([["you", "person", "hello from a session of alice"], ["alice", "worker", "alice heard you"]])
      expect(lines[0]?.run_id).toBe(first.outcome.runId)
      expect((yield* (yield* RunLog).read("alice", first.outcome.runId))?.channel).toBe("ops")
      // The next session of the channel starts from what was said in it: both sides, its own words marked as its own.
      const second = yield* talk("alice")
      expect(prompts(second.c)[0]).toBe(
        "Recent messages before this one:\n- you: hello from a session of alice\n- alice (you): alice heard you\n\nhello from a session of alice"
      )
      const other = yield* talk("bea")
      expect(prompts(other.c)[0]).toContain("- alice (a roster worker): alice heard you\n")
      expect(second.c.spec.Cmd.join(" ")).toContain(`/pihome/channel: the channel "ops" (read-only)`)
      const bad = yield* runSession({ worker: "alice", inbox: yield* Mailbox.make<SessionMessage>(), surface: "term-session", channel: "../etc" }).pipe(Effect.flip)
      expect(bad.message).toContain(`"../etc" is not a channel name`)
    }).pipe(Effect.provide(layer))
  })

  it.effect("three messages sent at once become three turns, in order, one prompt at a time", () => {
    const { layer, paths } = setup()
    return Effect.gen(function*() {
      const inbox = yield* Mailbox.make<SessionMessage>()
      const replies: Array<string> = []
      const fiber = yield* Effect.fork(runSession({
        worker: "alice", inbox, surface: "term-session", onReply: (t) => Effect.sync(() => void replies.push(t))
      }))
      yield* inbox.offerAll([msg("one"), msg("two"), msg("three")])
      const c = yield* eventually(box, "the box")
      // A session has no run ceiling, but its box is labelled with the session ceiling's end.
      expect(c.spec.Labels["roster.deadline"]).toBe(String(240 * 60_000))
      yield* eventually(Effect.sync(() => prompts(c).length === 1), "the first prompt")
      expect(prompts(c)).toEqual(["one"])
      yield* emit(c, assistant("reply one"), ...END)
      yield* eventually(Effect.sync(() => prompts(c).length === 2), "the second prompt")
      expect(prompts(c)).toEqual(["one", "two"])
      yield* emit(c, assistant("reply two"), ...END)
      yield* eventually(Effect.sync(() => prompts(c).length === 3), "the third prompt")
      yield* inbox.end
      yield* emit(c, assistant("reply three"), ...END)
      const outcome = yield* Fiber.join(fiber)
      expect(prompts(c)).toEqual(["one", "two", "three"])
      expect(replies).toEqual(["reply one", "reply two", "reply three"])
      expect(outcome).toMatchObject({ reason: "closed", clean: true, turns: 3 })
      expect(c.stdinClosed).toBe(true)
      expect(tokens(paths)).toEqual([])
      const record = yield* (yield* RunLog).read("alice", outcome.runId)
      expect(record).toMatchObject({ kind: "session", ended_by: "closed", exit_code: 0 })
      expect(fs.readFileSync(`${outcome.runDir}/stdout.jsonl`, "utf8")).toContain("reply three")
    }).pipe(Effect.provide(layer))
  })

  it.effect("a retried 529 (agent_end willRetry: true, auto_retry_start, ...) stays one turn", () => {
    const { layer } = setup()
    return Effect.gen(function*() {
      const inbox = yield* Mailbox.make<SessionMessage>()
      const fiber = yield* Effect.fork(runSession({ worker: "alice", inbox, surface: "term-session" }))
      yield* inbox.offerAll([msg("first"), msg("second")])
      const c = yield* eventually(box, "the box")
      yield* eventually(Effect.sync(() => prompts(c).length === 1), "the first prompt")
      yield* emit(c,
        line({ type: "message_end", message: { role: "assistant", content: [], stopReason: "error", errorMessage: "529 overloaded" } }),
        line({ type: "agent_end", messages: [], willRetry: true }),
        line({ type: "auto_retry_start", attempt: 1, maxAttempts: 3, delayMs: 2000, errorMessage: "529 overloaded" }),
        line({ type: "agent_start" }))
      yield* Effect.promise(() => new Promise((r) => setTimeout(r, 50)))
      expect(prompts(c)).toEqual(["first"])
      yield* emit(c, assistant("ok now"), ...END)
      yield* eventually(Effect.sync(() => prompts(c).length === 2), "the second prompt")
      yield* inbox.end
      yield* emit(c, ...END)
      expect((yield* Fiber.join(fiber)).turns).toBe(2)
    }).pipe(Effect.provide(layer))
  })

  it.effect("idle fires only between turns", () => {
    const { layer, paths } = setup("[box]\nidle_secs = 600\nturn_ceiling_min = 30\n")
    return Effect.gen(function*() {
      const inbox = yield* Mailbox.make<SessionMessage>()
      const fiber = yield* Effect.fork(runSession({ worker: "alice", inbox, surface: "term-session" }))
      yield* inbox.offer(msg("work"))
      const c = yield* eventually(box, "the box")
      yield* eventually(Effect.sync(() => prompts(c).length === 1), "the prompt")
      yield* TestClock.adjust("20 minutes") // twice the idle time, mid-turn
      expect(fiber.unsafePoll()).toBeNull()
      yield* emit(c, assistant("done"), ...END)
      yield* Effect.promise(() => new Promise((r) => setTimeout(r, 30)))
      yield* TestClock.adjust("9 minutes")
      expect(fiber.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 minute")
      const outcome = yield* Fiber.join(fiber)
      expect(outcome).toMatchObject({ reason: "idle", clean: true })
      expect(tokens(paths)).toEqual([])
    }).pipe(Effect.provide(layer))
  })

  it.effect("the turn ceiling cuts a hung turn, as an error; the turn's end says it did not finish", () => {
    const { layer, paths } = setup("[box]\nturn_ceiling_min = 30\n")
    return Effect.gen(function*() {
      const inbox = yield* Mailbox.make<SessionMessage>()
      const turns: Array<string> = []
      const fiber = yield* Effect.fork(runSession({
        worker: "alice", inbox, surface: "term-session",
        onTurnStart: (m) => Effect.sync(() => void turns.push(`start ${m.text}`)),
        onTurnEnd: (turn, e) => Effect.sync(() => void turns.push(`end ${turn} ${e.message?.text} delivered=${e.delivered} failed=${e.failed}`))
      }))
      yield* inbox.offer(msg("loop forever"))
      const c = yield* eventually(box, "the box")
      yield* eventually(Effect.sync(() => prompts(c).length === 1), "the prompt")
      yield* TestClock.adjust("30 minutes")
      const outcome = yield* Fiber.join(fiber)
      expect(outcome).toMatchObject({ reason: "turn-ceiling", clean: false })
      expect(turns).toEqual(["start loop forever", "end 1 loop forever delivered=false failed=true"])
      const record = yield* (yield* RunLog).read("alice", outcome.runId)
      expect(record).toMatchObject({ ended_by: "turn-ceiling", exit_code: null })
      expect(record?.error).toContain("mid-turn")
      expect(c.state).toBe("removed")
      expect(tokens(paths)).toEqual([])
    }).pipe(Effect.provide(layer))
  })

  it.effect("the session ceiling between turns is a clean end", () => {
    const { layer } = setup("[box]\nsession_ceiling_min = 5\nidle_secs = 3600\n")
    return Effect.gen(function*() {
      const inbox = yield* Mailbox.make<SessionMessage>()
      const fiber = yield* Effect.fork(runSession({ worker: "alice", inbox, surface: "term-session" }))
      yield* inbox.offer(msg("quick"))
      const c = yield* eventually(box, "the box")
      yield* eventually(Effect.sync(() => prompts(c).length === 1), "the prompt")
      yield* emit(c, assistant("done"), ...END)
      yield* Effect.promise(() => new Promise((r) => setTimeout(r, 30)))
      yield* TestClock.adjust("5 minutes")
      const outcome = yield* Fiber.join(fiber)
      expect(outcome).toMatchObject({ reason: "session-ceiling", clean: true })
      const record = yield* (yield* RunLog).read("alice", outcome.runId)
      expect(record).toMatchObject({ ended_by: "session-ceiling", exit_code: 0 })
    }).pipe(Effect.provide(layer))
  })

  it.effect("the inbox closing with nothing in flight ends the session at once", () => {
    const { layer, paths } = setup()
    return Effect.gen(function*() {
      const inbox = yield* Mailbox.make<SessionMessage>()
      yield* inbox.end
      const outcome = yield* runSession({ worker: "alice", inbox, surface: "term-session" })
      expect(outcome).toMatchObject({ reason: "closed", clean: true, turns: 0 })
      expect(tokens(paths)).toEqual([])
    }).pipe(Effect.provide(layer))
  })

  it.effect("a message that cannot be prepared is reported and skipped; the session goes on", () => {
    const { layer } = setup()
    return Effect.gen(function*() {
      const inbox = yield* Mailbox.make<SessionMessage>()
      const notes: Array<string> = []
      const fiber = yield* Effect.fork(runSession({ worker: "alice", inbox, surface: "term-session", onNote: (t) => Effect.sync(() => void notes.push(t)) }))
      yield* inbox.offerAll([msg("   "), msg("real one")])
      const c = yield* eventually(box, "the box")
      yield* eventually(Effect.sync(() => prompts(c).length === 1), "the prompt")
      expect(prompts(c)).toEqual(["real one"])
      expect(notes.some((n) => n.includes("could not be delivered") && n.includes("the message is blank"))).toBe(true)
      yield* inbox.end
      yield* emit(c, ...END)
      expect(yield* Fiber.join(fiber)).toMatchObject({ clean: true, turns: 1 })
    }).pipe(Effect.provide(layer))
  })

  it.effect("a run context that cannot be saved for turn 2 drops that message with a notice; turn 3 is served, the session goes on", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    // The context is saved at the run's start, then before each turn: the save before turn 2 (the third) fails.
    let contextSaves = 0
    const layer = unitLayer(paths, {
      docker: { script: rpcEngine },
      fs: (real) => ({
        rename: (from, to) =>
          to.includes(`${"/"}contexts${"/"}`) && ++contextSaves === 3
            ? Effect.fail(new SystemError({ reason: "Unknown", module: "FileSystem", method: "rename", pathOrDescriptor: to, description: "the disk said no (test)" }))
            : real.rename(from, to)
      })
    })
    return Effect.gen(function*() {
      const inbox = yield* Mailbox.make<SessionMessage>()
      const notes: Array<string> = []
      const replies: Array<string> = []
      const skipped: Array<string> = []
      const fiber = yield* Effect.fork(runSession({
        worker: "alice", inbox, surface: "term-session",
        onNote: (t) => Effect.sync(() => void notes.push(t)), onReply: (t) => Effect.sync(() => void replies.push(t)),
        // Where its sender is (a chat thread's desk says it there): told which message, and why.
        onSkipped: (m, why) => Effect.sync(() => void skipped.push(`${m.text}: ${why}`))
      }))
      yield* inbox.offer(msg("first"))
      const c = yield* eventually(box, "the box")
      yield* eventually(Effect.sync(() => prompts(c).length === 1), "the first prompt")
      yield* emit(c, assistant("reply one"), ...END)
      yield* inbox.offerAll([msg("second"), msg("third")])
      yield* eventually(Effect.sync(() => prompts(c).length === 2), "the next prompt")
      // The second never reached pi: its context could not be saved, and that was said.
      expect(prompts(c)).toEqual(["first", "third"])
      expect(notes.some((n) => n.includes("a message could not be delivered") && n.includes("the disk said no (test)"))).toBe(true)
      expect(skipped).toEqual([expect.stringMatching(/^second: its run context could not be saved \(.*the disk said no \(test\)/)])
      yield* emit(c, assistant("reply three"), ...END)
      yield* inbox.end
      expect(yield* Fiber.join(fiber)).toMatchObject({ clean: true, turns: 2 })
      expect(replies).toEqual(["reply one", "reply three"])
    }).pipe(Effect.provide(layer))
  })

  it.effect("a malformed event line never crashes the session", () => {
    const { layer } = setup()
    return Effect.gen(function*() {
      const inbox = yield* Mailbox.make<SessionMessage>()
      const replies: Array<string> = []
      const fiber = yield* Effect.fork(runSession({ worker: "alice", inbox, surface: "term-session", onReply: (t) => Effect.sync(() => void replies.push(t)) }))
      yield* inbox.offer(msg("hello"))
      const c = yield* eventually(box, "the box")
      yield* eventually(Effect.sync(() => prompts(c).length === 1), "the prompt")
      yield* emit(c, "not json", "{]", "null", "42", line({ type: "message_end" }), line({ type: "message_end", message: { role: "assistant", content: "x" } }), assistant("still here"), ...END)
      yield* inbox.end
      const outcome = yield* Fiber.join(fiber)
      expect(outcome).toMatchObject({ reason: "closed", clean: true })
      expect(replies).toEqual(["still here"])
    }).pipe(Effect.provide(layer))
  })

  it.effect("the box dying mid-turn is an error ending (box-died), token gone", () => {
    const { layer, paths } = setup()
    return Effect.gen(function*() {
      const inbox = yield* Mailbox.make<SessionMessage>()
      const fiber = yield* Effect.fork(runSession({ worker: "alice", inbox, surface: "term-session" }))
      yield* inbox.offer(msg("crash"))
      const c = yield* eventually(box, "the box")
      yield* eventually(Effect.sync(() => prompts(c).length === 1), "the prompt")
      yield* (yield* DockerFake).containers.get(c.id)?.stdout.end ?? Effect.void
      const outcome = yield* Fiber.join(fiber)
      expect(outcome).toMatchObject({ reason: "box-died", clean: false })
      expect(tokens(paths)).toEqual([])
    }).pipe(Effect.provide(layer))
  })

  it.effect("abort stops the turn in flight (pi's abort) and the session goes on", () => {
    const { layer } = setup()
    return Effect.gen(function*() {
      const inbox = yield* Mailbox.make<SessionMessage>()
      const controls = yield* Queue.unbounded<"abort">()
      const fiber = yield* Effect.fork(runSession({ worker: "alice", inbox, controls, surface: "term-session" }))
      yield* inbox.offer(msg("long"))
      const c = yield* eventually(box, "the box")
      yield* eventually(Effect.sync(() => prompts(c).length === 1), "the prompt")
      yield* controls.offer("abort")
      yield* eventually(Effect.sync(() => c.stdin.some((s) => JSON.parse(s).type === "abort")), "the abort command")
      yield* emit(c, line({ type: "agent_end", messages: [], willRetry: false }), line({ type: "agent_settled", aborted: true }))
      yield* inbox.offer(msg("next"))
      yield* eventually(Effect.sync(() => prompts(c).length === 2), "the next prompt")
      yield* inbox.end
      yield* emit(c, ...END)
      expect((yield* Fiber.join(fiber)).clean).toBe(true)
    }).pipe(Effect.provide(layer))
  })

  it.effect("on a chat surface, a turn with text but no send tool is reported as undelivered", () => {
    const { layer } = setup()
    return Effect.gen(function*() {
      const inbox = yield* Mailbox.make<SessionMessage>()
      const notes: Array<string> = []
      const fiber = yield* Effect.fork(runSession({ worker: "alice", inbox, surface: "chat-session", onNote: (t) => Effect.sync(() => void notes.push(t)) }))
      yield* inbox.offer({ ...msg("hi"), provider: "discord", author: "sam" })
      const c = yield* eventually(box, "the box")
      yield* eventually(Effect.sync(() => prompts(c).length === 1), "the prompt")
      expect(prompts(c)[0]).toContain("[discord message hi from sam]")
      yield* inbox.end
      yield* emit(c, assistant("twelve chars"), ...END)
      yield* Fiber.join(fiber)
      expect(notes.some((n) => n.includes("(12 chars) but no send action"))).toBe(true)
    }).pipe(Effect.provide(layer))
  })
})
