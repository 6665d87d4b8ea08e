import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import { briefable, continuesSentence, memoryBlock, replySentence, surfaceSentence } from "../../src/box/startInput.js"
import { layout } from "../../src/config/Paths.js"
import type { BoxCaller } from "../../src/gateway/actions/actionTypes.js"
import { forgetAction, rememberAction } from "../../src/gateway/actions/memoryActions.js"
import { type MemoryEntry, MemoryStore } from "../../src/memory/MemoryStore.js"
import { RunLog } from "../../src/run/RunLog.js"
import { tempPaths, unitLayer, writeFixture } from "../support/harness.js"

const RUN = "2026-12-01-10-00-00-0000aaaa"
const OTHER = "2026-12-01-10-00-00-0000bbbb"
const caller = (runId = RUN, worker = "alice"): BoxCaller => ({ subject: `org/${worker}`, runId, worker, taskId: null })
const post = (action: typeof rememberAction, c: BoxCaller, body: unknown) => action(c, JSON.stringify(body))

const deployment = (orgToml = "") => {
  const paths = tempPaths()
  writeFixture({ paths, orgToml, workers: ["alice", "bob"] })
  return { paths, layer: unitLayer(paths) }
}

describe("the Start input says where a run is and who asked, in one plain sentence each", () => {
  it("every surface and origin", () => {
    expect(surfaceSentence("direct-box", { _tag: "person", via: "cli" })).toBe(
      "This is a direct run: a person started it at the command line (roster worker run) and reads your final answer there."
    )
    expect(surfaceSentence("direct-box", { _tag: "person", via: "embed" })).toContain("a program embedding roster started it")
    const queued = (by: Parameters<typeof surfaceSentence>[1]) => surfaceSentence("queued-task", by)
    expect(queued({ _tag: "queue", task_id: "t-00000001", queued_by: { by: "person", run_id: null, task_id: null, via: "cli" } }))
      .toBe("This is queued task t-00000001, run unattended by roster's daemon; a person queued it at the command line (roster task add). No one watches it live: your final answer is recorded on the task.")
    expect(queued({ _tag: "queue", task_id: "t-00000001", queued_by: { by: "person", run_id: null, task_id: null, via: "web" } })).toContain("a person queued it in roster's web page")
    expect(queued({ _tag: "queue", task_id: "t-00000002", queued_by: { by: "self", run_id: RUN, task_id: "t-00000001" } }))
      .toContain(`you queued it yourself with set_tasks during run ${RUN} (task t-00000001)`)
    expect(queued({ _tag: "queue", task_id: "t-00000003", queued_by: { by: "chat", run_id: null, task_id: null, chat: { provider: "slack", channel: "C01", author: "U42" } } }))
      .toContain("it came from a message by U42 in Slack channel C01")
    expect(surfaceSentence("term-session", { _tag: "person", via: "cli" })).toContain("a conversation in a terminal (roster talk)")
    expect(surfaceSentence("web-session", { _tag: "person", via: "web" })).toContain("a conversation in roster's web page")
    expect(surfaceSentence("chat-session", { _tag: "chat", provider: "discord", channel: "9", author: "sam" }, { provider: "discord", channel: "9" }))
      .toContain("a conversation in Discord channel 9: each message is a turn, and your answers reach it only through the send tool")
  })

  it("where the answer goes, and what a continuation resumes", () => {
    expect(replySentence(null)).toBeUndefined()
    expect(replySentence(`talk:${RUN}`)).toBe(`When you finish, your final answer is delivered as a message into the live conversation ${RUN}.`)
    expect(replySentence("task:t-00000009")).toContain("delivered to task t-00000009's record")
    expect(replySentence("none")).toContain("sent nowhere else")
    expect(continuesSentence({ task_id: "t-00000001", run_id: RUN })).toContain(`This run continues task t-00000001 (run ${RUN})`)
  })

  it("memory: newest first within brief_max, a line for what was left out; pending and other channels' entries never briefed", () => {
    const entry = (n: number, over: Partial<MemoryEntry> = {}): MemoryEntry => ({
      id: `m-0000000${n}`, text: `fact number ${n}`, scope: "worker", run_id: RUN, time: `2026-12-0${n}T00:00:00.000Z`, pending: false, ...over
    })
    const all = [entry(1), entry(2), entry(3, { pending: true }), entry(4, { scope: "channel:ops" }), entry(5, { scope: "channel:dev" }), entry(6)]
    const forOps = briefable(all, "ops")
    expect(forOps.map((e) => e.id)).toEqual(["m-00000001", "m-00000002", "m-00000004", "m-00000006"])
    expect(briefable(all, null).map((e) => e.id)).toEqual(["m-00000001", "m-00000002", "m-00000006"])
    const whole = memoryBlock(forOps, 8000)
    expect(whole.ids).toEqual(["m-00000006", "m-00000004", "m-00000002", "m-00000001"])
    expect(whole.text).toContain("- [m-00000006, 2026-12-06] fact number 6\n- [m-00000004, 2026-12-04, channel:ops] fact number 4")
    expect(whole.text).not.toContain("left out")
    const cut = memoryBlock(forOps, 290)
    expect(cut.ids).toEqual(["m-00000006"])
    expect(cut.text).toContain("fact number 6\n(3 older entries left out: they did not fit in the briefing's 290 characters.)")
    expect((cut.text ?? "").length).toBeLessThanOrEqual(290)
    expect(memoryBlock([], 8000).text).toBeUndefined()
  })
})

describe("worker memory through the gateway's remember and forget", () => {
  it.effect("provenance from the token, an id back; bounds refused with what to do; forget only what is the worker's own", () => {
    const { paths, layer } = deployment("[memory]\nmax_entries = 2\nentry_max = 40\n")
    return Effect.gen(function*() {
      yield* (yield* RunLog).start({ runId: RUN, worker: "alice", kind: "box" })
      yield* (yield* RunLog).start({ runId: OTHER, worker: "bob", kind: "box" })
      const first = yield* post(rememberAction, caller(), { text: "the deploy key lives in vault entry ops" })
      expect(first.status).toBe(200)
      const id = (first.body as { id: string }).id
      expect(id).toMatch(/^m-[0-9a-f]{8}$/)
      const [kept] = yield* (yield* MemoryStore).list("alice")
      expect(kept).toMatchObject({ id, text: "the deploy key lives in vault entry ops", scope: "worker", run_id: RUN, pending: false })
      // Kept host-side only, 0600 in a 0700 folder.
      expect(fs.statSync(layout(paths).memoryFile("alice")).mode & 0o777).toBe(0o600)
      expect(fs.statSync(`${paths.data}/memory`).mode & 0o777).toBe(0o700)
      const long = yield* post(rememberAction, caller(), { text: "x".repeat(41) })
      expect(long).toMatchObject({ status: 400, body: { error: expect.stringContaining("at most 40 characters (this one has 41)") } })
      expect((yield* post(rememberAction, caller(), { text: "  " })).status).toBe(400)
      expect((yield* post(rememberAction, caller(), { text: "second" })).status).toBe(200)
      const full = yield* post(rememberAction, caller(), { text: "third" })
      expect(full).toMatchObject({ status: 429, body: { error: expect.stringContaining("your memory is full (2 of 2 entries): forget one") } })
      // A channel scope only for the channel the run serves (this one serves none).
      const scoped = yield* post(rememberAction, caller(), { text: "ops note", scope: "channel:ops" })
      expect(scoped).toMatchObject({ status: 403, body: { error: expect.stringContaining("this run serves no channel") } })
      // bob's run cannot forget alice's entry: it is not in bob's memory.
      const foreign = yield* post(forgetAction, caller(OTHER, "bob"), { id })
      expect(foreign.status).toBe(404)
      expect((yield* (yield* MemoryStore).list("alice")).map((e) => e.id)).toContain(id)
      expect((yield* post(forgetAction, caller(), { id })).status).toBe(200)
      expect((yield* (yield* MemoryStore).list("alice")).map((e) => e.id)).not.toContain(id)
      expect((yield* post(forgetAction, caller(), { id })).status).toBe(404)
    }).pipe(Effect.provide(Layer.mergeAll(layer)))
  })

  it.effect("a run of a channel may write that channel's scope, and no other", () => {
    const { layer } = deployment()
    return Effect.gen(function*() {
      const runLog = yield* RunLog
      yield* runLog.start({ runId: RUN, worker: "alice", kind: "box" })
      yield* runLog.update("alice", RUN, { channel: "ops" })
      expect((yield* post(rememberAction, caller(), { text: "ops fact", scope: "channel:ops" })).status).toBe(200)
      const other = yield* post(rememberAction, caller(), { text: "dev fact", scope: "channel:dev" })
      expect(other).toMatchObject({ status: 403, body: { error: `this run serves channel ops: its scope is "channel:ops" (or "worker")` } })
      expect((yield* post(rememberAction, caller(), { text: "x", scope: "channel:../x" })).status).toBe(403)
    }).pipe(Effect.provide(layer))
  })

  it.effect("a tainted run's entry is held pending until a person accepts it; a run tainted after it wrote has its entries held too", () => {
    const { layer } = deployment()
    return Effect.gen(function*() {
      const runLog = yield* RunLog
      const memory = yield* MemoryStore
      yield* runLog.start({ runId: RUN, worker: "alice", kind: "box" })
      const before = yield* post(rememberAction, caller(), { text: "written before the taint" })
      yield* runLog.append("alice", RUN, { kind: "taint", taint: { reason: "egress_refused", host: "evil.example.com", time: "2026-12-01T10:00:01.000Z", detail: "no_rule" } })
      const after = yield* post(rememberAction, caller(), { text: "written while tainted" })
      expect(after).toMatchObject({ status: 200, body: { pending: true, note: expect.stringContaining("held for a person's review") } })
      const afterId = (after.body as { id: string }).id
      expect((yield* memory.list("alice")).find((e) => e.id === afterId)?.pending).toBe(true)
      // A tainted run may not forget.
      expect((yield* post(forgetAction, caller(), { id: (before.body as { id: string }).id })).status).toBe(403)
      // The gateway's taint path holds what the run wrote earlier.
      expect(yield* memory.holdRun("alice", RUN, "egress_refused (evil.example.com)")).toBe(1)
      expect((yield* memory.list("alice")).every((e) => e.pending)).toBe(true)
      expect(briefable(yield* memory.list("alice"), null)).toEqual([])
      yield* memory.accept("alice", afterId, "person test")
      expect(briefable(yield* memory.list("alice"), null).map((e) => e.id)).toEqual([afterId])
      const again = yield* memory.accept("alice", afterId, "person test").pipe(Effect.flip)
      expect(again.message).toContain("is not pending")
    }).pipe(Effect.provide(layer))
  })
})
