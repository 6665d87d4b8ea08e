import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer } from "effect"
import { currentOwner } from "../../src/contract/owner.js"
import type { RunContext } from "../../src/contract/runContext.js"
import type { BoxCaller } from "../../src/gateway/actions/actionTypes.js"
import { setTasks } from "../../src/gateway/actions/setTasks.js"
import { chatSend } from "../../src/gateway/actions/chat/sendAction.js"
import { messageUser } from "../../src/gateway/actions/messageUser.js"
import { termSend } from "../../src/gateway/actions/termSend.js"
import { recentChannel } from "../../src/journal/channel.js"
import { saveRunContext } from "../../src/run/runContext.js"
import { RunLog } from "../../src/run/RunLog.js"
import { deliverPending } from "../../src/supervisor/deliver.js"
import { PERSON, queueTask } from "../../src/supervisor/queueTask.js"
import type { TaskRecord } from "../../src/task/TaskRecord.js"
import { TaskStore } from "../../src/task/TaskStore.js"
import { startDiscordStandIn } from "../support/discordStandIn.js"
import { startSlackStandIn } from "../support/slackStandIn.js"
import { eventually, tempPaths, unitLayer, writeFixture } from "../support/harness.js"

const BOT = "xoxb-unit-bot-token-0002"
const APP = "xapp-unit-app-token-0002"
const DISCORD = "discord-unit-bot-token-0002"

const chatToml = (slackApi = "http://127.0.0.1:9/api/", discordApi = "http://127.0.0.1:9/api/") => [
  "[[chat]]", `provider = "slack"`, `connection = "slack"`, `api_url = "${slackApi}"`,
  "[[chat.channel]]", `id = "C0ALICE"`, `worker = "alice"`,
  "[[chat.channel]]", `id = "C0BOB"`, `worker = "bob"`,
  "[[chat]]", `provider = "discord"`, `connection = "discord"`, `api_url = "${discordApi}"`,
  "[[chat.channel]]", `id = "700000000000000001"`, `worker = "alice"`
].join("\n")

const deployment = (orgToml = chatToml()) => {
  const paths = tempPaths()
  writeFixture({ paths, workers: ["alice", "bob"], orgToml })
  return TaskStore.layer.pipe(Layer.provideMerge(unitLayer(paths, {
    vault: { slack: { type: "slack", bot_token: BOT, app_token: APP }, discord: { type: "discord", bot_token: DISCORD } }
  })))
}

const context = (c: Partial<RunContext> & Pick<RunContext, "run_id" | "worker" | "surface">): RunContext => ({
  origin: { _tag: "person", via: "cli" }, task_id: null, channel: null, reply_to: null, continues: null, taints: [], memory_briefed: [],
  turns: 0, saved_at: "2026-12-01T10:00:00.000Z", ...c
})

/** A run of `worker` with its record and saved context, as a box's run has them. */
const aRun = (c: Partial<RunContext> & Pick<RunContext, "run_id" | "worker" | "surface">, kind: "box" | "task" | "session") =>
  Effect.gen(function*() {
    yield* (yield* RunLog).start({ runId: c.run_id, worker: c.worker, kind, owner: yield* currentOwner })
    yield* saveRunContext(context(c))
    return <BoxCaller> { subject: `org/${c.worker}`, runId: c.run_id, worker: c.worker, taskId: c.task_id ?? null }
  })

const ask = (caller: BoxCaller, replyTo: string) =>
  setTasks(caller, JSON.stringify({ tasks: [{ prompt: "follow up", reply_to: replyTo }] }))

describe("a worker replies only to its own places", () => {
  it.effect("set_tasks naming another worker's task, talk session or chat channel is refused (403) and queues nothing", () =>
    Effect.gen(function*() {
      const store = yield* TaskStore
      const bobsTask = yield* queueTask({ worker: "bob", prompt: "bob's own work" }, PERSON)
      const alicesTask = yield* queueTask({ worker: "alice", prompt: "alice's work" }, PERSON)
      const bobsTalk = yield* aRun({ run_id: "2026-12-01-10-00-00-0000b0b5", worker: "bob", surface: "term-session" }, "session")
      const alice = yield* aRun({ run_id: "2026-12-01-10-00-01-0000a11c", worker: "alice", surface: "queued-task", task_id: alicesTask.task_id }, "task")
      const alicesChat = yield* aRun({
        run_id: "2026-12-01-10-00-02-0000c4a7", worker: "alice", surface: "chat-session", chat: { provider: "slack", channel: "C0ALICE", thread: "5.5" },
        origin: { _tag: "chat", provider: "slack", channel: "C0ALICE", author: "U0ANNA" }
      }, "session")
      for (const [caller, place] of [
        [alice, `task:${bobsTask.task_id}`],
        [alice, `talk:${bobsTalk.runId}`],
        [alice, "chat:slack:C0BOB/1700000000.1"],
        [alice, "chat:slack:C0ALICE/5.5"],
        [alicesChat, "chat:slack:C0BOB/1700000000.1"],
        [alicesChat, "chat:slack:C0ALICE/9.9"],
        [alicesChat, `task:${alicesTask.task_id}`]
      ] as const) {
        const out = yield* ask(caller, place)
        expect(out, `${caller.runId} → ${place}`).toMatchObject({ status: 403, body: { ok: false, error: expect.stringContaining("a worker replies only to its own places") } })
      }
      expect((yield* store.list).map((t) => t.task_id).sort()).toEqual([bobsTask.task_id, alicesTask.task_id].sort())
      // Its own places are its own: the task it runs for, the thread its chat session serves.
      expect(yield* ask(alice, `task:${alicesTask.task_id}`)).toMatchObject({ status: 200 })
      expect(yield* ask(alicesChat, "chat:slack:C0ALICE/5.5")).toMatchObject({ status: 200 })
      expect((yield* store.get(bobsTask.task_id))?.replies).toBeUndefined()
    }).pipe(Effect.provide(deployment())))

  it.effect("a reply to a talk session that is not one is refused when it is queued, saying why", () =>
    Effect.gen(function*() {
      const oneShot = yield* aRun({ run_id: "2026-12-01-10-00-00-00000001", worker: "bob", surface: "direct-box" }, "box")
      const ended = yield* aRun({ run_id: "2026-12-01-10-00-00-00000002", worker: "bob", surface: "term-session" }, "session")
      yield* (yield* RunLog).finish("bob", ended.runId, { endedBy: "closed", exitCode: 0 })
      const live = yield* aRun({ run_id: "2026-12-01-10-00-00-00000003", worker: "bob", surface: "term-session" }, "session")
      const refusal = (replyTo: string) => queueTask({ worker: "alice", prompt: "x", reply_to: replyTo }, PERSON).pipe(Effect.flip, Effect.map((e) => e.message))
      expect(yield* refusal("talk:2026-12-01-09-59-59-0000dead")).toBe(
        "reply_to talk:2026-12-01-09-59-59-0000dead: there is no run 2026-12-01-09-59-59-0000dead — a reply goes to a live conversation (roster talk, the web's Talk)"
      )
      expect(yield* refusal(`talk:${oneShot.runId}`)).toContain(`run ${oneShot.runId} is a one-shot run, not a talk session`)
      expect(yield* refusal(`talk:${ended.runId}`)).toContain(`the session ${ended.runId} has ended`)
      const queued = yield* queueTask({ worker: "alice", prompt: "x", reply_to: `talk:${live.runId}` }, PERSON)
      expect(queued.reply_to).toBe(`talk:${live.runId}`)
    }).pipe(Effect.provide(deployment())))

  it.effect("a record that names another worker's place as a worker's own follow-up is not delivered there (the check runs again at delivery)", () =>
    Effect.gen(function*() {
      const store = yield* TaskStore
      const bobsTask = yield* queueTask({ worker: "bob", prompt: "bob's own work" }, PERSON)
      const alice = yield* aRun({ run_id: "2026-12-01-10-00-01-0000a11d", worker: "alice", surface: "direct-box" }, "box")
      // Written before the check existed (or by hand): alice's follow-up answering into bob's task.
      const [planted] = yield* store.addAll([{
        worker: "alice", prompt: "write into bob", ceilingMin: null, after: null,
        origin: { by: "self", run_id: alice.runId, task_id: null }, replyTo: `task:${bobsTask.task_id}`
      }], () => undefined)
      yield* store.update(planted!.task_id, (t, now) => ({ ...t, status: "done", final_text: "I was here", finished_at: now }))
      yield* deliverPending()
      const after = yield* store.get(planted!.task_id)
      expect(after?.delivery).toMatchObject({ ok: false, error: expect.stringContaining("a worker replies only to its own places") })
      expect((yield* store.get(bobsTask.task_id))?.replies).toBeUndefined()
    }).pipe(Effect.provide(deployment())))
})

/** A done task of alice's whose answer goes to `replyTo`. */
const doneTask = (replyTo: string, text: string) =>
  Effect.gen(function*() {
    const store = yield* TaskStore
    const t = yield* queueTask({ worker: "alice", prompt: "answer in the thread", reply_to: replyTo }, PERSON)
    return yield* store.update(t.task_id, (x, now) => ({ ...x, status: "done", final_text: text, finished_at: now }))
  })

const delivered = (t: TaskRecord) => Effect.map(Effect.flatMap(TaskStore, (s) => s.get(t.task_id)), (x) => x?.delivery)

describe("a chat delivery is posted once", () => {
  it.live("a slow Slack (3 s to answer a post) and a second pass of the queue meanwhile: one post", () =>
    Effect.gen(function*() {
      const slack = yield* Effect.acquireRelease(Effect.promise(() => startSlackStandIn({ bot: BOT, app: APP })), (s) => Effect.promise(() => s.close()))
      slack.postDelay = 3000
      yield* Effect.gen(function*() {
        const t = yield* doneTask("chat:slack:C0ALICE/1700000000.7", "the answer, once")
        // The run's own end delivers it, and the dispatch loop's pass comes while the post waits for Slack.
        yield* Effect.all([deliverPending(), Effect.delay(deliverPending(), "300 millis"), Effect.delay(deliverPending(), "1500 millis")], { concurrency: "unbounded" })
        expect(slack.posts.filter((p) => p.text === "the answer, once")).toHaveLength(1)
        expect(yield* delivered(t)).toMatchObject({ ok: true, target: "chat:slack:C0ALICE/1700000000.7" })
        expect((yield* delivered(t))?.pending).toBeUndefined()
      }).pipe(Effect.provide(deployment(chatToml(slack.apiUrl))))
    }).pipe(Effect.scoped))

  it.live("a daemon killed with the post in flight: the next start finds the post by its mark and does not post again; one never sent is sent", () =>
    Effect.gen(function*() {
      const slack = yield* Effect.acquireRelease(Effect.promise(() => startSlackStandIn({ bot: BOT, app: APP })), (s) => Effect.promise(() => s.close()))
      yield* Effect.gen(function*() {
        const store = yield* TaskStore
        slack.postDelay = "never"
        const inFlight = yield* doneTask("chat:slack:C0ALICE/1700000000.8", "posted just before the kill")
        const fiber = yield* Effect.fork(deliverPending())
        yield* eventually(Effect.sync(() => slack.posts.length === 1), "the post reaches Slack")
        // The daemon dies here: its fiber never hears Slack's answer.
        yield* Fiber.interrupt(fiber)
        expect(yield* delivered(inFlight)).toMatchObject({ pending: true, mark: expect.stringMatching(/^rd-/) })
        // Its claim stands: this daemon's next pass (not a start) leaves it to the start that resumes it.
        yield* deliverPending()
        expect(slack.posts).toHaveLength(1)
        // A delivery whose daemon died before its post left: pending, and not in the channel.
        const neverSent = yield* doneTask("chat:slack:C0ALICE", "never reached Slack")
        yield* store.update(neverSent.task_id, (x) => ({
          ...x, delivery: { target: "chat:slack:C0ALICE", at: new Date().toISOString(), ok: false, pending: true as const, mark: `rd-${x.task_id.slice(2)}`, claim: "dead" }
        }))
        slack.postDelay = 0
        // The next daemon's start.
        yield* deliverPending(true)
        expect(slack.posts.map((p) => p.text)).toEqual(["posted just before the kill", "never reached Slack"])
        expect(yield* delivered(inFlight)).toMatchObject({ ok: true })
        expect(yield* delivered(neverSent)).toMatchObject({ ok: true })
        expect(slack.posts[1]?.metadata).toEqual({ event_type: "roster_delivery", event_payload: { mark: `rd-${neverSent.task_id.slice(2)}`, part: 0 } })
      }).pipe(Effect.provide(deployment(chatToml(slack.apiUrl))))
    }).pipe(Effect.scoped))

  it.live("Discord: a delivery resumed after a crash finds its own message and does not post it again", () =>
    Effect.gen(function*() {
      const discord = yield* Effect.acquireRelease(Effect.promise(() => startDiscordStandIn(DISCORD)), (d) => Effect.promise(() => d.close()))
      yield* Effect.gen(function*() {
        const store = yield* TaskStore
        const t = yield* doneTask("chat:discord:700000000000000001", "said once on discord")
        yield* deliverPending()
        expect(discord.posts.map((p) => [p.content, p.nonce])).toEqual([["said once on discord", `rd-${t.task_id.slice(2)}.0`]])
        // As if the daemon died after the post and before its outcome was written.
        yield* store.update(t.task_id, (x) => ({ ...x, delivery: { ...x.delivery!, ok: false, pending: true as const, claim: "dead" } }))
        yield* deliverPending(true)
        expect(discord.posts).toHaveLength(1)
        expect(yield* delivered(t)).toMatchObject({ ok: true })
      }).pipe(Effect.provide(deployment(chatToml(undefined, discord.apiUrl))))
    }).pipe(Effect.scoped))
})

describe("term_send speaks only where there is a terminal", () => {
  it.effect("from a talk session it is kept with the run's messages; from a one-shot run or a chat session the gateway refuses it (403)", () =>
    Effect.gen(function*() {
      const talk = yield* aRun({ run_id: "2026-12-01-11-00-00-0000e1a1", worker: "alice", surface: "term-session" }, "session")
      expect((yield* termSend(talk, JSON.stringify({ text: "between turns" }))).status).toBe(200)
      for (const [runId, surface, kind] of [["2026-12-01-11-00-01-0000e1a2", "direct-box", "box"], ["2026-12-01-11-00-02-0000e1a3", "chat-session", "session"]] as const) {
        const other = yield* aRun({ run_id: runId, worker: "alice", surface }, kind)
        const refused = yield* termSend(other, JSON.stringify({ text: "to no one" }))
        expect(refused.status, surface).toBe(403)
        expect(JSON.stringify(refused.body)).toContain("use message_user")
      }
    }).pipe(Effect.provide(deployment())))
})

describe("a chat session's words reach its thread and stay in its channel's history", () => {
  const chatRun = (runId: string) => aRun({
    run_id: runId, worker: "alice", surface: "chat-session", chat: { provider: "slack", channel: "C0ALICE", thread: "1700000000.5" },
    origin: { _tag: "chat", provider: "slack", channel: "C0ALICE", author: "U0ANNA" }
  }, "session")

  it.live("message_user and slack_send are posted in the session's thread and kept as the worker's own; elsewhere message_user posts nothing", () =>
    Effect.gen(function*() {
      const slack = yield* Effect.acquireRelease(Effect.promise(() => startSlackStandIn({ bot: BOT, app: APP })), (s) => Effect.promise(() => s.close()))
      yield* Effect.gen(function*() {
        const chat = yield* chatRun("2026-12-01-12-00-00-0000c4a1")
        expect(yield* messageUser(chat, JSON.stringify({ text: "a heads-up first" }))).toMatchObject({ status: 200, body: { ok: true, messages: 1 } })
        expect(yield* chatSend("slack")(chat, JSON.stringify({ text: "the answer" }))).toMatchObject({ status: 200 })
        expect(slack.posts.map((p) => [p.channel, p.thread_ts, p.text, p.token])).toEqual([
          ["C0ALICE", "1700000000.5", "a heads-up first", BOT],
          ["C0ALICE", "1700000000.5", "the answer", BOT]
        ])
        const history = yield* recentChannel("slack-c0alice")
        expect(history.map((h) => [h.author, h.role, h.text, h.run_id])).toEqual([
          ["alice", "worker", "a heads-up first", chat.runId],
          ["alice", "worker", "the answer", chat.runId]
        ])
        // A one-shot run's message_user is for the person at the end of the run: kept, never posted.
        const oneShot = yield* aRun({ run_id: "2026-12-01-12-00-01-0000c4a2", worker: "alice", surface: "direct-box" }, "box")
        expect(yield* messageUser(oneShot, JSON.stringify({ text: "for the run's person" }))).toMatchObject({ status: 200, body: { ok: true } })
        expect(slack.posts).toHaveLength(2)
      }).pipe(Effect.provide(deployment(chatToml(slack.apiUrl))))
    }).pipe(Effect.scoped))

  it.effect("a post that fails is the tool's error (502), not a send: nothing is added to the history as said", () =>
    Effect.gen(function*() {
      const chat = yield* chatRun("2026-12-01-12-00-02-0000c4a3")
      for (const said of [messageUser(chat, JSON.stringify({ text: "never posted" })), chatSend("slack")(chat, JSON.stringify({ text: "nor this" }))]) {
        const out = yield* said
        expect(out.status).toBe(502)
        expect(JSON.stringify(out.body)).toContain("could not be posted")
      }
      expect(yield* recentChannel("slack-c0alice")).toEqual([])
    }).pipe(Effect.provide(deployment())))
})
