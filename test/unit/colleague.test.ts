import { SystemError } from "@effect/platform/Error"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { runOnce } from "../../src/box/runOnce.js"
import { layout } from "../../src/config/Paths.js"
import { currentOwner } from "../../src/contract/owner.js"
import { runFiles } from "../../src/contract/runFiles.js"
import { DockerFake } from "../../src/docker/DockerTest.js"
import { setTasks } from "../../src/gateway/actions/setTasks.js"
import { readRunContext, saveRunContext } from "../../src/run/runContext.js"
import { RunLog } from "../../src/run/RunLog.js"
import { deliverPending } from "../../src/supervisor/deliver.js"
import { PERSON, queueTask } from "../../src/supervisor/queueTask.js"
import { Supervisor } from "../../src/supervisor/Supervisor.js"
import { TaskStore } from "../../src/task/TaskStore.js"
import { eventually, tempPaths, type UnitOptions, unitLayer, writeFixture } from "../support/harness.js"

const answer = (text: string) => JSON.stringify({ type: "message_end", message: { role: "assistant", content: [{ type: "text", text }], stopReason: "stop" } })

const deployment = (o: UnitOptions = {}) => {
  const paths = tempPaths()
  writeFixture({ paths, workers: ["alice", "bob"] })
  return { paths, layer: TaskStore.layer.pipe(Layer.provideMerge(unitLayer(paths, { docker: { script: () => ({ stdout: [`${answer("all done")}\n`], exitCode: 0 }) }, ...o }))) }
}
const identityFiles = (paths: ReturnType<typeof tempPaths>) => (fs.existsSync(layout(paths).identityDir) ? fs.readdirSync(layout(paths).identityDir) : [])

describe("the run context, host-side", () => {
  it.effect("is saved before the box is created, outside the run folder the box sees; it says surface, origin, channel and memory briefed", () => {
    // The fake engine looks for the context at the moment the container is created.
    const seenAtCreate: Array<boolean> = []
    const paths0 = tempPaths()
    writeFixture({ paths: paths0, workers: ["alice"] })
    const paths = paths0
    const layer = TaskStore.layer.pipe(Layer.provideMerge(unitLayer(paths, {
      docker: {
        script: (spec) => {
          seenAtCreate.push(fs.existsSync(layout(paths).contextFile("alice", spec.Labels["roster.run-id"] ?? "")))
          return { stdout: [`${answer("ok")}\n`], exitCode: 0 }
        }
      }
    })))
    return Effect.gen(function*() {
      const outcome = yield* runOnce({ worker: "alice", prompt: "do it", origin: { _tag: "person", via: "cli" }, channel: "ops" })
      const ctx = yield* readRunContext("alice", outcome.runId)
      expect(ctx).toMatchObject({
        run_id: outcome.runId, worker: "alice", surface: "direct-box", origin: { _tag: "person", via: "cli" }, channel: "ops",
        reply_to: null, continues: null, memory_briefed: [], task_id: null
      })
      const file = layout(paths).contextFile("alice", outcome.runId)
      expect(file.startsWith(path.join(paths.data, "contexts"))).toBe(true)
      expect(fs.statSync(file).mode & 0o777).toBe(0o600)
      // Nothing of it in the run's folder (the box's /pihome/self/runs).
      expect(fs.readdirSync(outcome.runDir)).not.toContain(`${outcome.runId}.json`)
      // Already there when the container was created.
      expect(seenAtCreate).toEqual([true])
    }).pipe(Effect.provide(layer))
  })

  it.effect("a save that fails ends the run before any box exists: no container, no token, ended_by error with the reason", () => {
    const { paths, layer } = deployment({
      fs: (real) => ({
        writeFile: (p, data, o) =>
          p.includes(`${path.sep}contexts${path.sep}`)
            ? Effect.fail(new SystemError({ reason: "PermissionDenied", module: "FileSystem", method: "writeFile", pathOrDescriptor: p, description: "EACCES: the disk said no" }))
            : real.writeFile(p, data, o)
      })
    })
    return Effect.gen(function*() {
      const failed = yield* runOnce({ worker: "alice", prompt: "do it" }).pipe(Effect.flip)
      expect(failed.message).toContain("the run context")
      expect(failed.message).toContain("could not be saved")
      expect((yield* (yield* DockerFake).callsOf("containerCreate"))).toEqual([])
      expect(identityFiles(paths)).toEqual([])
      const runs = fs.readdirSync(layout(paths).workerRunsDir("alice"))
      const record = yield* (yield* RunLog).read("alice", runs[0] ?? "")
      expect(record).toMatchObject({ ended_by: "error", error: expect.stringContaining("could not be saved") })
    }).pipe(Effect.provide(layer))
  })
})

describe("continuation", () => {
  it.effect("a follow-up of another worker's task is refused; of its own, it resumes that run's pi session (a copy) under its session id", () => {
    const { paths, layer } = deployment()
    return Effect.gen(function*() {
      const store = yield* TaskStore
      const first = yield* queueTask({ worker: "alice", prompt: "the word is pelican" }, PERSON)
      const refused = yield* queueTask({ worker: "bob", prompt: "carry on", continue: first.task_id }, PERSON).pipe(Effect.flip)
      expect(refused.message).toBe(`--continue ${first.task_id}: that task is alice's — a worker carries on only its own work`)
      // alice's first task runs (here by hand, as the daemon would) and leaves a session file.
      const run = yield* runOnce({ worker: "alice", prompt: first.prompt, taskId: first.task_id })
      yield* store.update(first.task_id, (t, now) => ({ ...t, status: "done", run_ids: [run.runId], finished_at: now }))
      const sessionDir = path.join(runFiles(run.runDir).home, "session")
      fs.writeFileSync(path.join(sessionDir, "the-session.jsonl"), `{"type":"session","word":"pelican"}\n`)
      fs.symlinkSync("/etc/shadow", path.join(sessionDir, "planted"))
      const previousKey = JSON.parse(fs.readFileSync(runFiles(run.runDir).context, "utf8")).cache.route_key as string
      const next = yield* queueTask({ worker: "alice", prompt: "what was the word?", continue: first.task_id }, PERSON)
      expect(next.continues).toEqual({ task_id: first.task_id, run_id: run.runId })
      expect((yield* store.get(first.task_id))?.continued_by).toEqual([next.task_id])
      const second = yield* runOnce({ worker: "alice", prompt: next.prompt, taskId: next.task_id, continues: { task_id: first.task_id, run_id: run.runId } })
      const copied = path.join(runFiles(second.runDir).home, "session")
      expect(fs.readFileSync(path.join(copied, "the-session.jsonl"), "utf8")).toContain("pelican")
      // A link the box planted is copied as a link, never followed on the host.
      expect(fs.lstatSync(path.join(copied, "planted")).isSymbolicLink()).toBe(true)
      const [, spec] = yield* (yield* DockerFake).callsOf("containerCreate")
      const cmd = spec?.Cmd ?? []
      expect(cmd[cmd.indexOf("--session-id") + 1]).toBe(previousKey)
      expect(cmd.at(-1)).toContain(`This run continues task ${first.task_id} (run ${run.runId})`)
      expect((yield* readRunContext("alice", second.runId))?.continues).toEqual({ task_id: first.task_id, run_id: run.runId })
      void paths
    }).pipe(Effect.provide(layer))
  })

  it.effect("set_tasks continue: the follow-up resumes the calling run, and inherits its reply_to unless it names another", () => {
    const { layer } = deployment()
    return Effect.gen(function*() {
      const RUN = "2026-12-01-10-00-00-0000c0de"
      const target = yield* queueTask({ worker: "bob", prompt: "collect answers" }, PERSON)
      yield* (yield* RunLog).start({ runId: RUN, worker: "alice", kind: "box" })
      yield* saveRunContext({
        run_id: RUN, worker: "alice", surface: "queued-task", origin: { _tag: "person", via: "cli" }, task_id: null, channel: null,
        reply_to: `task:${target.task_id}`, continues: null, taints: [], memory_briefed: [], turns: 0, saved_at: "2026-12-01T10:00:00.000Z"
      })
      const caller = { subject: "org/alice", runId: RUN, worker: "alice", taskId: null }
      const out = yield* setTasks(caller, JSON.stringify({ tasks: [{ prompt: "carry on", continue: true }, { prompt: "elsewhere", reply_to: "none" }] }))
      expect(out.status).toBe(200)
      const [a, b] = yield* (yield* TaskStore).list.pipe(Effect.map((ts) => ts.filter((t) => t.worker === "alice")))
      expect(a).toMatchObject({ prompt: "carry on", continues: { task_id: null, run_id: RUN }, reply_to: `task:${target.task_id}` })
      expect(b).toMatchObject({ prompt: "elsewhere", reply_to: "none" })
      expect(b?.continues).toBeUndefined()
      const chat = yield* setTasks(caller, JSON.stringify({ tasks: [{ prompt: "x", reply_to: "chat:slack:C01" }] }))
      // A place the run did not come from is not its to name (replyPlaces.test has each kind).
      expect(chat).toMatchObject({ status: 403, body: { error: expect.stringContaining("a worker replies only to its own places") } })
    }).pipe(Effect.provide(layer))
  })
})

describe("a chat session's follow-up", () => {
  it.effect("set_tasks from a chat session answers in the thread the session is serving", () => {
    const paths = tempPaths()
    writeFixture({
      paths, workers: ["alice"],
      orgToml: ["[[chat]]", `provider = "slack"`, `connection = "slack"`, "[[chat.channel]]", `id = "C01"`, `worker = "alice"`].join("\n")
    })
    const layer = TaskStore.layer.pipe(Layer.provideMerge(unitLayer(paths)))
    return Effect.gen(function*() {
      const RUN = "2026-12-01-10-00-00-0000c4a7"
      yield* (yield* RunLog).start({ runId: RUN, worker: "alice", kind: "session" })
      yield* saveRunContext({
        run_id: RUN, worker: "alice", surface: "chat-session", chat: { provider: "slack", channel: "C01", thread: "1700000000.5" },
        origin: { _tag: "chat", provider: "slack", channel: "C01", author: "U0ANNA" }, task_id: null, channel: "slack-c01",
        reply_to: null, continues: null, taints: [], memory_briefed: [], turns: 1, saved_at: "2026-12-01T10:00:00.000Z"
      })
      const out = yield* setTasks({ subject: "org/alice", runId: RUN, worker: "alice", taskId: null }, JSON.stringify({ tasks: [{ prompt: "look later" }] }))
      expect(out.status).toBe(200)
      const [t] = yield* (yield* TaskStore).list
      expect(t).toMatchObject({ prompt: "look later", reply_to: "chat:slack:C01/1700000000.5" })
    }).pipe(Effect.provide(layer))
  })
})

describe("reply_to", () => {
  const startSupervisor = Layer.build(Supervisor.layer).pipe(Effect.map(Context.get(Supervisor)))

  it.scoped("a task's answer lands on the target task once, across a daemon restart between its end and its delivery", () => {
    const { paths, layer } = deployment()
    return Effect.gen(function*() {
      const store = yield* TaskStore
      const target = yield* queueTask({ worker: "bob", prompt: "wait for answers" }, PERSON)
      yield* store.update(target.task_id, (t, now) => ({ ...t, status: "cancelled", finished_at: now }))
      const asker = yield* queueTask({ worker: "alice", prompt: "answer bob", reply_to: `task:${target.task_id}` }, PERSON)
      // The daemon died after the task ended and before its delivery: it is done, with no delivery recorded.
      yield* store.update(asker.task_id, (t, now) => ({ ...t, status: "done", final_text: "the answer is 42", finished_at: now }))
      // The next daemon delivers it at start.
      yield* Effect.scoped(startSupervisor)
      const delivered = yield* store.get(asker.task_id)
      expect(delivered?.delivery).toMatchObject({ target: `task:${target.task_id}`, ok: true })
      expect((yield* store.get(target.task_id))?.replies).toEqual([
        { from_task: asker.task_id, worker: "alice", at: expect.any(String), status: "done", text: "the answer is 42" }
      ])
      // A crash after the target got it but before the delivery was recorded: made again, taken once.
      yield* store.update(asker.task_id, (t) => {
        const { delivery: _, ...rest } = t
        return rest
      })
      yield* deliverPending()
      yield* Effect.scoped(startSupervisor)
      expect((yield* store.get(target.task_id))?.replies).toHaveLength(1)
      const journal = fs.readFileSync(layout(paths).journalFile("bob"), "utf8").trim().split("\n").map((l) => JSON.parse(l))
      expect(journal.filter((l) => l.kind === "reply")).toHaveLength(1)
    }).pipe(Effect.provide(layer))
  })

  it.scoped("a failed task's reply says how it failed; a talk session that has ended is a failed delivery, recorded", () => {
    const { layer } = deployment({ docker: { script: () => ({ stdout: [], exitCode: 3 }) } })
    return Effect.gen(function*() {
      const store = yield* TaskStore
      const target = yield* queueTask({ worker: "bob", prompt: "collect" }, PERSON)
      const ended = "2026-12-01-10-00-00-00000e0d"
      yield* (yield* RunLog).start({ runId: ended, worker: "bob", kind: "session", owner: yield* currentOwner })
      const failing = yield* queueTask({ worker: "alice", prompt: "fails", reply_to: `task:${target.task_id}` }, PERSON)
      // Queued while the session is live; it has ended by the time the answer comes.
      const toTalk = yield* queueTask({ worker: "alice", prompt: "to a session", reply_to: `talk:${ended}` }, PERSON)
      yield* (yield* RunLog).finish("bob", ended, { endedBy: "closed", exitCode: 0 })
      const sup = yield* startSupervisor
      void sup
      yield* eventually(Effect.map(store.get(toTalk.task_id), (t) => t?.delivery !== undefined && !t.delivery.pending), "both delivered", 15_000)
      const reply = (yield* store.get(target.task_id))?.replies?.[0]
      expect(reply).toMatchObject({ from_task: failing.task_id, status: "failed" })
      expect(reply?.text).toMatch(new RegExp(`^task ${failing.task_id} of alice failed: the box exited with code 3`))
      expect((yield* store.get(toTalk.task_id))?.delivery).toMatchObject({ target: `talk:${ended}`, ok: false, error: expect.stringContaining(`the session ${ended} has ended`) })
    }).pipe(Effect.provide(layer))
  })

  it.effect("an unknown form, a task that does not exist, and a chat channel org.toml does not map are refused when the task is queued", () => {
    const { layer } = deployment()
    return Effect.gen(function*() {
      const bad = (replyTo: string) => queueTask({ worker: "alice", prompt: "x", reply_to: replyTo }, PERSON).pipe(Effect.flip, Effect.map((e) => e.message))
      expect(yield* bad("email:me")).toContain("is not a reply target: use talk:<run-id>, task:<task-id>")
      expect(yield* bad("task:t-0000dead")).toContain("no such task")
      expect(yield* bad("chat:slack:C01/1700000000.1")).toContain("org.toml maps no slack channel C01 — add a [[chat.channel]]")
      expect(yield* bad("chat:discord:123")).toContain("org.toml maps no discord channel 123")
      expect(yield* bad("talk:yesterday")).toContain("not a run id")
    }).pipe(Effect.provide(layer))
  })
})
