import { SystemError } from "@effect/platform/Error"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Exit, Fiber, Layer, Ref, Scope, Stream, TestClock } from "effect"
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { layout } from "../../src/config/Paths.js"
import { currentOwner, ownerAlive, processStart } from "../../src/contract/owner.js"
import type { ContainerSpec } from "../../src/docker/Docker.js"
import { Docker } from "../../src/docker/Docker.js"
import { DockerFake } from "../../src/docker/DockerTest.js"
import { FleetMember } from "../../src/fleet/FleetMember.js"
import { RunLog } from "../../src/run/RunLog.js"
import { Supervisor } from "../../src/supervisor/Supervisor.js"
import { TaskStore } from "../../src/task/TaskStore.js"
import { Vault } from "../../src/vault/Vault.js"
import { BlankPrompt, type RunOutcome, type RunRequest } from "../../src/box/runOnce.js"
import { exitedOk, RunnerCalls, WarmAsks } from "../../src/testing.js"
import { Runner } from "../../src/runner/Runner.js"
import { eventually, tempPaths, type UnitOptions, unitLayer, writeFixture } from "../support/harness.js"

type Paths = ReturnType<typeof tempPaths>

/** A box whose prompt says HANG runs until it is killed or told to exit; any other exits 0 at once. */
const script = (spec: ContainerSpec) => (spec.Cmd.join(" ").includes("HANG") ? { hang: true } : { exitCode: 0 })

const deployment = (orgToml = "[supervisor]\nconcurrency = 2\n", o: UnitOptions = {}) => {
  const paths = tempPaths()
  writeFixture({ paths, orgToml, workers: ["alice", "bob", "carol"] })
  const layer = TaskStore.layer.pipe(Layer.provideMerge(unitLayer(paths, { docker: { script }, ...o })))
  return { paths, layer }
}

/** A fleet node as the supervisor sees it: joined, not fenced, not cut off, no other node's boxes; `over` for what a test changes. */
const fakeMember = (over: Partial<Context.Tag.Service<FleetMember>>) =>
  Layer.succeed(FleetMember, {
    node: "here",
    status: Effect.die("unused"),
    changes: Stream.never,
    fenced: Effect.succeed(false),
    cutOff: Effect.succeed(false),
    leaseInDoubt: Effect.succeed(false),
    rejoin: Effect.void,
    takeBox: () => Effect.succeed(true),
    giveBox: () => Effect.void,
    boxElsewhere: () => Effect.succeed(false),
    nudgeApprovals: () => Effect.void,
    elsewhere: Effect.succeed([]),
    ...over
  })

const startSupervisor = Layer.build(Supervisor.layer).pipe(Effect.map(Context.get(Supervisor)))

const tokens = (paths: Paths) => (fs.existsSync(layout(paths).identityDir) ? fs.readdirSync(layout(paths).identityDir) : [])
const running = Effect.map(DockerFake, (fake) => [...fake.containers.values()].filter((c) => c.state === "running"))
/** The running box of a task, once it has one (a task is claimed before its box is created). */
const boxOf = (taskId: string) =>
  eventually(Effect.map(running, (cs) => cs.find((c) => c.spec.Labels["roster.task-id"] === taskId)), `a box for ${taskId}`, 15_000)
const statusOf = (taskId: string) => Effect.flatMap(TaskStore, (s) => s.get(taskId)).pipe(Effect.map((t) => t?.status))
const waitStatus = (taskId: string, status: string) =>
  eventually(Effect.map(statusOf(taskId), (s) => s === status), `task ${taskId} ${status}`, 15_000)

/** A box left running by an owner: its run record and a container labelled as roster would have made it. */
const leftBox = (paths: Paths, o: { readonly runId: string; readonly kind: "task" | "box"; readonly taskId?: string; readonly owner: { readonly pid: number; readonly start: string }; readonly deadline: number }) =>
  Effect.gen(function*() {
    yield* (yield* RunLog).start({ runId: o.runId, worker: "alice", kind: o.kind, ...(o.taskId ? { taskId: o.taskId } : {}) })
    fs.mkdirSync(layout(paths).identityDir, { recursive: true })
    fs.writeFileSync(`${layout(paths).identityDir}/${"a".repeat(64)}.json`, JSON.stringify({ subject: "org/alice", run_id: o.runId, worker: "alice", task_id: o.taskId ?? null }))
    const docker = yield* Docker
    const id = yield* docker.containerCreate({
      name: `roster-box-${o.runId}`,
      Image: "roster-box:1",
      Cmd: ["HANG"],
      Env: [],
      Labels: {
        "roster.run-id": o.runId, "roster.worker": "alice", "roster.kind": o.kind, "roster.deployment": paths.config,
        "roster.deadline": String(o.deadline), "roster.owner-pid": String(o.owner.pid), "roster.owner-start": o.owner.start,
        ...(o.taskId ? { "roster.task-id": o.taskId } : {})
      },
      User: "1000:1000", WorkingDir: "/pihome/workspace", OpenStdin: false, StdinOnce: false, AttachStdin: false,
      AttachStdout: true, AttachStderr: true, Tty: false,
      HostConfig: { AutoRemove: true, NetworkMode: "roster-locked", ExtraHosts: [], Dns: [], CapDrop: ["ALL"], SecurityOpt: [], Tmpfs: {}, Binds: [] }
    })
    yield* docker.containerStart(id)
    return id
  })

/** Another process that lives until the test's scope closes. */
const livingProcess = Effect.acquireRelease(
  Effect.sync(() => spawn("sleep", ["60"], { stdio: "ignore" })),
  (child) => Effect.sync(() => child.kill("SIGKILL"))
).pipe(Effect.map((child) => ({ pid: child.pid ?? -1 })))

/** A pid that just ended (so it names no process now). */
const deadPid = () => spawnSync(process.execPath, ["-e", ""]).pid

describe("the supervisor (Docker test layer)", () => {
  it.scoped("runs queued tasks in order, at most `concurrency` at once and one box per worker", () => {
    const { layer } = deployment()
    return Effect.gen(function*() {
      const sup = yield* startSupervisor
      const a1 = yield* sup.add({ worker: "alice", prompt: "HANG first" })
      const a2 = yield* sup.add({ worker: "alice", prompt: "HANG second" })
      const b1 = yield* sup.add({ worker: "bob", prompt: "HANG" })
      const c1 = yield* sup.add({ worker: "carol", prompt: "HANG" })
      yield* boxOf(a1.task_id)
      yield* boxOf(b1.task_id)
      // alice already has a box; carol would be a third.
      expect(yield* statusOf(a2.task_id)).toBe("queued")
      expect(yield* statusOf(c1.task_id)).toBe("queued")
      expect(yield* running).toHaveLength(2)
      // The reaper's next look leaves the daemon's own boxes alone.
      yield* TestClock.adjust("3 seconds")
      expect(yield* running).toHaveLength(2)
      expect((yield* sup.status).boxes.map((b) => b.held_by)).toEqual(["daemon", "daemon"])
      const box = yield* boxOf(a1.task_id)
      yield* (yield* DockerFake).exit(box.id, 0)
      yield* waitStatus(a1.task_id, "done")
      // The freed slot goes to the next in order whose worker is free: alice's second, not carol.
      yield* waitStatus(a2.task_id, "running")
      expect(yield* statusOf(c1.task_id)).toBe("queued")
      const record = yield* Effect.flatMap(TaskStore, (s) => s.get(a1.task_id))
      expect(record?.run_ids).toHaveLength(1)
      const run = yield* Effect.flatMap(RunLog, (r) => r.read("alice", record?.run_ids[0] ?? ""))
      expect(run).toMatchObject({ kind: "task", task_id: a1.task_id, ended_by: "exit", exit_code: 0 })
      expect(box.spec.Env).toContain(`ROSTER_TASK_ID=${a1.task_id}`)
    }).pipe(Effect.provide(layer))
  })

  it.live("a fleet's node: another node's running task is not its to fail and keeps that worker busy here; a cancel goes both ways through the task", () => {
    const { layer } = deployment()
    const member = fakeMember({
      rejoin: Effect.void
    })
    return Effect.gen(function*() {
      const store = yield* TaskStore
      const origin = { by: "person" as const, run_id: null, task_id: null }
      const elsewhere = yield* store.add({ worker: "alice", prompt: "HANG", ceilingMin: null, after: null, origin })
      yield* store.update(elsewhere.task_id, (t, now) => ({
        ...t, status: "running", started_at: now, node: "there", attempt: 1, run_ids: ["2026-12-02-00-00-00-0000abcd"]
      }))
      const sup = yield* startSupervisor
      const mine = yield* sup.add({ worker: "alice", prompt: "HANG mine" })
      const bob = yield* sup.add({ worker: "bob", prompt: "HANG" })
      yield* boxOf(bob.task_id)
      yield* Effect.sleep("2500 millis")
      // Recovery left it running (its box is on the other node), and alice's next task waits for it.
      expect(yield* statusOf(elsewhere.task_id)).toBe("running")
      expect(yield* statusOf(mine.task_id)).toBe("queued")
      // Its cancel is asked on the task, and answered when the node running it ends it (played here).
      const cancelling = yield* Effect.fork(sup.cancel(elsewhere.task_id))
      yield* eventually(Effect.map(store.get(elsewhere.task_id), (t) => t?.cancel_requested?.on_node === "here"), "the cancel request", 5000)
      yield* store.update(elsewhere.task_id, (t, now) => ({ ...t, status: "cancelled", finished_at: now }))
      expect((yield* cancelling.await.pipe(Effect.flatten)).status).toBe("cancelled")
      yield* waitStatus(mine.task_id, "running")
      // A cancel another node asks of a box here: this node stops it (within its 5 s look, without LISTEN).
      yield* store.update(bob.task_id, (t, now) => ({ ...t, cancel_requested: { at: now, on_node: "there" } }))
      yield* eventually(Effect.map(statusOf(bob.task_id), (st) => st === "cancelled"), "bob's task cancelled", 15_000)
      expect((yield* running).some((c) => c.spec.Labels["roster.task-id"] === bob.task_id)).toBe(false)
    }).pipe(Effect.provide(member), Effect.provide(layer), Effect.scoped)
  }, 30_000)

  it.live("a node the fleet fenced claims nothing, kills its boxes (their runs ended as fenced), leaves its task to the node that has it, then joins again", () => {
    const { layer } = deployment()
    const fenced = Ref.unsafeMake(false)
    const rejoined = Ref.unsafeMake(0)
    const member = fakeMember({
      fenced: Ref.get(fenced),
      // The test lets it back in itself, after it has seen the queue stand still.,
      rejoin: Ref.update(rejoined, (n) => n + 1)
    })
    return Effect.gen(function*() {
      const store = yield* TaskStore
      const sup = yield* startSupervisor
      const a = yield* sup.add({ worker: "alice", prompt: "HANG" })
      const box = yield* boxOf(a.task_id)
      const first = box.spec.Labels["roster.run-id"]!
      // The fleet declared this node lost: alice's task went to another node, which runs attempt 2.
      const second = "2026-12-02-00-00-00-0000beef"
      yield* store.update(a.task_id, (t) => ({ ...t, node: "there", attempt: 2, run_ids: [...t.run_ids, second] }))
      yield* Ref.set(fenced, true)
      const b = yield* sup.add({ worker: "bob", prompt: "HANG" })
      yield* eventually(Effect.map(Ref.get(rejoined), (n) => n >= 1), "the node to join again", 15_000)
      // Its box is gone, its run says why, and nothing of the fenced attempt touched the task.
      expect((yield* running).some((c) => c.spec.Labels["roster.run-id"] === first)).toBe(false)
      const run = yield* Effect.flatMap(RunLog, (r) => r.read("alice", first))
      expect(run).toMatchObject({ ended_by: "fenced" })
      expect(run?.error).toContain("declared lost")
      expect(yield* store.get(a.task_id)).toMatchObject({ status: "running", node: "there", run_ids: [first, second] })
      // Nothing is claimed while fenced (passes come every 2 s); joined again, bob's task runs.
      yield* Effect.sleep("2500 millis")
      expect(yield* statusOf(b.task_id)).toBe("queued")
      yield* Ref.set(fenced, false)
      yield* boxOf(b.task_id)
    }).pipe(Effect.provide(member), Effect.provide(layer), Effect.scoped)
  }, 30_000)

  it.live("a node cut off from the fleet's database stops its boxes (their runs ended as cut-off), claims nothing, and once a beat lands its task carries on from the stopped run", () => {
    const { layer } = deployment()
    const cutOff = Ref.unsafeMake(false)
    const member = fakeMember({
      cutOff: Ref.get(cutOff),
      leaseInDoubt: Effect.succeed(false),
      rejoin: Effect.die("a node cut off is not fenced: it never joins again")
    })
    return Effect.gen(function*() {
      const store = yield* TaskStore
      const sup = yield* startSupervisor
      const a = yield* sup.add({ worker: "alice", prompt: "HANG" })
      const first = (yield* boxOf(a.task_id)).spec.Labels["roster.run-id"]!
      yield* Ref.set(cutOff, true)
      const b = yield* sup.add({ worker: "bob", prompt: "HANG" })
      // Its box is stopped, and the run says why; the task waits to carry on from it.
      yield* eventually(Effect.map(running, (cs) => cs.length === 0), "the cut-off node's boxes stopped", 10_000)
      yield* waitStatus(a.task_id, "queued")
      const run = yield* Effect.flatMap(RunLog, (r) => r.read("alice", first))
      expect(run).toMatchObject({ ended_by: "cut-off" })
      expect(run?.error).toContain("cut off from the fleet's database")
      const stopped = yield* store.get(a.task_id)
      expect(stopped).toMatchObject({ status: "queued", interrupted: { run_id: first, by: "cut-off" }, continues: { task_id: a.task_id, run_id: first } })
      // Nothing is claimed while cut off (passes come every 2 s).
      yield* Effect.sleep("2500 millis")
      expect([yield* statusOf(a.task_id), yield* statusOf(b.task_id)]).toEqual(["queued", "queued"])
      // A beat lands: both run, alice's as the continuation of her stopped run.
      yield* Ref.set(cutOff, false)
      const again = yield* boxOf(a.task_id)
      expect(again.spec.Labels["roster.run-id"]).not.toBe(first)
      yield* boxOf(b.task_id)
      expect((yield* store.get(a.task_id))?.run_ids).toEqual([first, again.spec.Labels["roster.run-id"]])
    }).pipe(Effect.provide(member), Effect.provide(layer), Effect.scoped)
  }, 30_000)

  it.live("a chat session's box slot counts toward concurrency and one box per worker: that worker's task waits until it ends", () => {
    const { layer } = deployment()
    return Effect.gen(function*() {
      const sup = yield* startSupervisor
      const session = yield* Scope.make()
      yield* sup.holdSlot("alice", "chat:slack:C0TEAM").pipe(Scope.extend(session))
      const a = yield* sup.add({ worker: "alice", prompt: "HANG" })
      const b = yield* sup.add({ worker: "bob", prompt: "HANG" })
      yield* boxOf(b.task_id)
      // Passes have come and gone (one a wake-up, one its 2 s tick): alice's task is still waiting.
      yield* Effect.sleep("2500 millis")
      expect(yield* statusOf(a.task_id)).toBe("queued")
      // Concurrency 2 is taken (alice's session, bob's task): a second session waits for a slot.
      const carol = yield* Scope.make()
      const waiting = yield* sup.holdSlot("carol", "chat:slack:C0OPS").pipe(Scope.extend(carol), Effect.fork)
      yield* Effect.sleep("1500 millis")
      expect(waiting.unsafePoll()).toBeNull()
      yield* Scope.close(session, Exit.void)
      yield* waitStatus(a.task_id, "running")
      expect(waiting.unsafePoll()).toBeNull()
      const box = yield* boxOf(b.task_id)
      yield* (yield* DockerFake).exit(box.id, 0)
      yield* waitStatus(b.task_id, "done")
      yield* eventually(Effect.sync(() => waiting.unsafePoll() !== null), "carol's session to get a slot", 15_000)
      yield* Scope.close(carol, Exit.void)
    }).pipe(Effect.provide(layer), Effect.scoped)
  }, 30_000)

  it.live("a person's handed-over run holds its worker's one box on this node without a slot: it waits (said once) while the worker's task runs, then keeps the worker's next task waiting, and other workers' tasks still take the slots", () => {
    const { layer } = deployment()
    return Effect.gen(function*() {
      const sup = yield* startSupervisor
      const a = yield* sup.add({ worker: "alice", prompt: "HANG" })
      const first = yield* boxOf(a.task_id)
      const said: Array<string> = []
      const run = yield* Scope.make()
      const waiting = yield* sup.holdWorker("alice", "direct:one", (text) => Effect.sync(() => void said.push(text))).pipe(Scope.extend(run), Effect.fork)
      yield* Effect.sleep("2500 millis")
      expect(waiting.unsafePoll()).toBeNull()
      expect(said).toEqual(["alice has a box running (one box per worker): this run starts when it ends"])
      yield* (yield* DockerFake).exit(first.id, 0)
      yield* waitStatus(a.task_id, "done")
      yield* eventually(Effect.sync(() => waiting.unsafePoll() !== null), "the person's run to get its place", 10_000)
      // While it runs: alice's next task waits; bob's and carol's take both slots (concurrency 2) — the run took none.
      const next = yield* sup.add({ worker: "alice", prompt: "HANG" })
      const b = yield* sup.add({ worker: "bob", prompt: "HANG" })
      const c = yield* sup.add({ worker: "carol", prompt: "HANG" })
      yield* waitStatus(b.task_id, "running")
      yield* waitStatus(c.task_id, "running")
      yield* Effect.sleep("2500 millis")
      expect(yield* statusOf(next.task_id)).toBe("queued")
      // A second run of alice waits; its person's Ctrl-C ends the wait.
      const second = yield* sup.holdWorker("alice", "direct:two", () => Effect.void).pipe(Effect.scoped, Effect.forkDaemon)
      yield* Effect.sleep("1500 millis")
      yield* Fiber.interruptFork(second)
      yield* Effect.sleep("1500 millis")
      const ended = second.unsafePoll()
      expect(ended !== null && Exit.isInterrupted(ended)).toBe(true)
      yield* Scope.close(run, Exit.void)
      // Its place given back, alice's task waits only for a free slot now.
      yield* (yield* DockerFake).exit((yield* boxOf(b.task_id)).id, 0)
      yield* waitStatus(next.task_id, "running")
    }).pipe(Effect.provide(layer), Effect.scoped)
  }, 30_000)

  it.live("in a fleet a chat session waits while its worker's box row is held elsewhere, takes it before it counts, and gives it back when it ends", () => {
    const { layer } = deployment()
    const elsewhere = Ref.unsafeMake(true)
    const taken = Ref.unsafeMake<ReadonlyArray<string>>([])
    const given = Ref.unsafeMake<ReadonlyArray<string>>([])
    const member = fakeMember({
      takeBox: (worker, key) =>
        Ref.get(elsewhere).pipe(Effect.flatMap((held) => (held ? Effect.succeed(false) : Ref.update(taken, (t) => [...t, `${worker} ${key}`]).pipe(Effect.as(true))))),
      giveBox: (worker, key) => Ref.update(given, (g) => [...g, `${worker} ${key}`])
    })
    return Effect.gen(function*() {
      const sup = yield* startSupervisor
      const session = yield* Scope.make()
      const waiting = yield* sup.holdSlot("alice", "chat:slack:C0TEAM").pipe(Scope.extend(session), Effect.fork)
      yield* Effect.sleep("1500 millis")
      expect(waiting.unsafePoll()).toBeNull()
      yield* Ref.set(elsewhere, false)
      yield* eventually(Effect.sync(() => waiting.unsafePoll() !== null), "the session to get its slot", 10_000)
      expect(yield* Ref.get(taken)).toEqual(["alice chat:slack:C0TEAM"])
      yield* Scope.close(session, Exit.void)
      expect(yield* Ref.get(given)).toEqual(["alice chat:slack:C0TEAM"])
    }).pipe(Effect.provide(member), Effect.provide(layer), Effect.scoped)
  }, 30_000)

  it.scoped("a task with a channel runs in that channel; a bad channel name is refused before it is queued", () => {
    const { layer } = deployment()
    return Effect.gen(function*() {
      const sup = yield* startSupervisor
      const t = yield* sup.add({ worker: "alice", prompt: "HANG", channel: "ops" })
      expect(t.channel).toBe("ops")
      yield* waitStatus(t.task_id, "running")
      const box = yield* boxOf(t.task_id)
      expect(box.spec.Env).toContain("ROSTER_CHANNEL_DIR=/pihome/channel")
      expect(box.spec.HostConfig.Binds.some((b) => b.endsWith(":/pihome/channel/store"))).toBe(true)
      const bad = yield* sup.add({ worker: "alice", prompt: "x", channel: "../up" }).pipe(Effect.flip)
      expect(bad.message).toContain(`"../up" is not a channel name`)
      yield* (yield* DockerFake).exit(box.id, 0)
      yield* waitStatus(t.task_id, "done")
    }).pipe(Effect.provide(layer))
  })

  it.scoped("a failed box fails its task with the reason; a task --after it then fails too", () => {
    const { layer } = deployment()
    return Effect.gen(function*() {
      const sup = yield* startSupervisor
      const first = yield* sup.add({ worker: "alice", prompt: "HANG" })
      const next = yield* sup.add({ worker: "bob", prompt: "after it", after: first.task_id })
      yield* waitStatus(first.task_id, "running")
      expect(yield* statusOf(next.task_id)).toBe("queued")
      yield* (yield* DockerFake).exit((yield* boxOf(first.task_id)).id, 3)
      yield* waitStatus(first.task_id, "failed")
      const failed = yield* sup.show(first.task_id)
      expect(failed.reason).toMatch(/exited with code 3/)
      yield* waitStatus(next.task_id, "failed")
      expect((yield* sup.show(next.task_id)).reason).toMatch(new RegExp(`waits for task ${first.task_id}, which ended failed`))
    }).pipe(Effect.provide(layer))
  })

  it.scoped("cancel: a queued task never runs; a running one's box is killed and its task and run say cancelled", () => {
    const { paths, layer } = deployment("[supervisor]\nconcurrency = 1\n")
    return Effect.gen(function*() {
      const sup = yield* startSupervisor
      const busy = yield* sup.add({ worker: "alice", prompt: "HANG" })
      const waiting = yield* sup.add({ worker: "bob", prompt: "never" })
      yield* boxOf(busy.task_id)
      expect((yield* sup.cancel(waiting.task_id)).status).toBe("cancelled")
      const cancelled = yield* sup.cancel(busy.task_id)
      expect(cancelled.status).toBe("cancelled")
      expect(cancelled.ended_by).toBe("cancelled")
      expect(yield* running).toEqual([])
      expect(tokens(paths)).toEqual([])
      const run = yield* Effect.flatMap(RunLog, (r) => r.read("alice", cancelled.run_ids[0] ?? ""))
      expect(run?.ended_by).toBe("cancelled")
      // Only the running task ever had a box.
      expect(yield* Effect.flatMap(DockerFake, (f) => f.callsOf("containerCreate"))).toHaveLength(1)
      const again = yield* Effect.flip(sup.cancel(busy.task_id))
      expect(again.message).toMatch(/already ended: cancelled/)
    }).pipe(Effect.provide(layer))
  })

  it.scoped("holds the queue while no model credential exists, and resumes when one is added", () => {
    const { layer } = deployment(undefined, { env: {}, vault: {} })
    return Effect.gen(function*() {
      const sup = yield* startSupervisor
      const t = yield* sup.add({ worker: "alice", prompt: "HANG" })
      yield* waitStatus(t.task_id, "held")
      expect((yield* sup.show(t.task_id)).reason).toMatch(/roster connection add anthropic/)
      expect((yield* sup.status).held_reason).toMatch(/no model credential/)
      yield* (yield* Vault).put("anthropic", { type: "api_key", key: "sk-ant-vault" })
      // A tick of the dispatch loop sees it: no restart. (Ticked until it does: a pass still in its file reads when the
      // clock moves sets its next sleep after the move.)
      yield* eventually(TestClock.adjust("2 seconds").pipe(Effect.zipRight(Effect.map(running, (cs) => cs.find((c) => c.spec.Labels["roster.task-id"] === t.task_id)))), `a box for ${t.task_id}`)
    }).pipe(Effect.provide(layer))
  })

  it.scoped("a box that cannot be created fails its task: no container, no token", () => {
    const { paths, layer } = deployment(undefined, {
      docker: { script, before: (op) => (op === "containerCreate" ? Effect.die(new Error("the engine fell over")) : Effect.void) }
    })
    return Effect.gen(function*() {
      const sup = yield* startSupervisor
      const t = yield* sup.add({ worker: "alice", prompt: "HANG" })
      yield* waitStatus(t.task_id, "failed")
      expect((yield* sup.show(t.task_id)).reason).toMatch(/the engine fell over/)
      expect(yield* running).toEqual([])
      expect(tokens(paths)).toEqual([])
    }).pipe(Effect.provide(layer))
  })

  it.scoped("a task left running by a daemon that died with its box (a crash, a reboot) is queued again to carry on, and run once; on_interrupt = \"fail\" fails it", () =>
    Effect.gen(function*() {
      for (const mode of ["resume", "fail"] as const) {
        const { paths, layer } = deployment(`[supervisor]\nconcurrency = 2\non_interrupt = "${mode}"\n`)
        yield* Effect.gen(function*() {
          const store = yield* TaskStore
          const runId = "2026-11-29-10-00-00-0000abcd"
          const t = yield* store.add({ worker: "alice", prompt: "HANG", ceilingMin: null, after: null, origin: { by: "person", run_id: null, task_id: null } })
          // The claim was written and the run had begun (its record and Start context); then the daemon died with its box.
          yield* store.update(t.task_id, (x, now) => ({ ...x, status: "running", started_at: now, run_ids: [runId] }))
          yield* (yield* RunLog).start({ runId, worker: "alice", kind: "task", taskId: t.task_id })
          fs.mkdirSync(`${layout(paths).runDir("alice", runId)}/home/session`, { recursive: true })
          fs.writeFileSync(`${layout(paths).runDir("alice", runId)}/context.json`, JSON.stringify({ cache: { route_key: "roster-pc-00000000deadbeef" } }))
          yield* startSupervisor
          const after = yield* store.get(t.task_id)
          if (mode === "fail") {
            expect(after?.status).toBe("failed")
            expect(after?.reason).toMatch(/the daemon stopped while it ran and its box is gone; it was not re-run/)
            yield* TestClock.adjust("2 seconds")
            expect(yield* Effect.flatMap(DockerFake, (f) => f.callsOf("containerCreate"))).toEqual([])
            return
          }
          expect(after).toMatchObject({ interrupted: { run_id: runId, by: "restart" }, continues: { task_id: t.task_id, run_id: runId } })
          expect((yield* (yield* RunLog).read("alice", runId))?.finished_at).not.toBeNull()
          // It runs again — once — as a continuation: the interrupted run's pi session, and a Start input that says so.
          const box = yield* boxOf(t.task_id)
          const cmd = box.spec.Cmd
          expect(cmd[cmd.indexOf("--session-id") + 1]).toBe("roster-pc-00000000deadbeef")
          expect(cmd.at(-1)).toContain(`Your previous run of this task (${runId}) was interrupted at`)
          expect(cmd.at(-1)).toContain("a crash or a reboot")
          expect((yield* store.get(t.task_id))?.run_ids).toHaveLength(2)
          yield* TestClock.adjust("4 seconds")
          expect(yield* Effect.flatMap(DockerFake, (f) => f.callsOf("containerCreate"))).toHaveLength(1)
        }).pipe(Effect.scoped, Effect.provide(layer))
      }
    }))

  it.scoped("retries: a model call that fails twice, then answers — done on attempt 3 after a 30 s and a 60 s wait; a ceiling is never tried again; task retry", () => {
    let calls = 0
    const failing = (spec: ContainerSpec) => {
      if (spec.Cmd.join(" ").includes("STUCK-AT-ITS-CEILING")) return { hang: true }
      if (!spec.Cmd.join(" ").includes("FLAKY")) return { exitCode: 0 }
      calls++
      const failed = JSON.stringify({ type: "message_end", message: { role: "assistant", content: [], stopReason: "error", errorMessage: "529 overloaded (stand-in)" } })
      const ok = JSON.stringify({ type: "message_end", message: { role: "assistant", content: [{ type: "text", text: "answered" }], stopReason: "stop" } })
      return { stdout: [`${calls <= 2 ? failed : ok}\n`], exitCode: 0 }
    }
    const { layer } = deployment("[supervisor]\nconcurrency = 2\nretries = 2\nretry_backoff_s = 30\n", { docker: { script: failing } })
    return Effect.gen(function*() {
      const sup = yield* startSupervisor
      const t = yield* sup.add({ worker: "alice", prompt: "FLAKY" })
      const backoff = (n: number) =>
        Effect.gen(function*() {
          // Ticked until it shows (the end of a run waits on the clock: its output drained within a bound).
          yield* eventually(TestClock.adjust("10 millis").pipe(Effect.zipRight(Effect.map((yield* TaskStore).get(t.task_id), (x) =>
            x?.status === "queued" && (x.attempts?.length ?? 0) === n))), `attempt ${n} failed and queued again`)
          const x = (yield* (yield* TaskStore).get(t.task_id))!
          expect(x.reason).toContain(`attempt ${n} failed (the model call failed: 529 overloaded (stand-in))`)
          // Waiting out its backoff: no box before it passes.
          const boxes = (yield* Effect.flatMap(DockerFake, (f) => f.callsOf("containerCreate"))).length
          yield* TestClock.adjust(`${30 * 2 ** (n - 1) - 5} seconds`)
          expect((yield* Effect.flatMap(DockerFake, (f) => f.callsOf("containerCreate"))).length).toBe(boxes)
          yield* TestClock.adjust("7 seconds")
        })
      yield* backoff(1)
      yield* backoff(2)
      yield* waitStatus(t.task_id, "done")
      const done = (yield* (yield* TaskStore).get(t.task_id))!
      expect(done.run_ids).toHaveLength(3)
      expect(done.attempts?.map((a) => [a.ended_by, a.reason !== null])).toEqual([["exit", true], ["exit", true], ["exit", false]])
      expect(calls).toBe(3)

      // A ceiling is a person's to look at: never tried again.
      const c = yield* sup.add({ worker: "bob", prompt: "STUCK-AT-ITS-CEILING", ceiling_min: 1 })
      yield* boxOf(c.task_id)
      yield* TestClock.adjust("61 seconds")
      yield* waitStatus(c.task_id, "failed")
      expect((yield* (yield* TaskStore).get(c.task_id))?.reason).toContain("its ceiling (1 min) ended it")
      yield* TestClock.adjust("5 minutes")
      expect(yield* statusOf(c.task_id)).toBe("failed")
      // roster task retry: back in the queue, carrying on from its last run.
      const again = yield* sup.retry(c.task_id)
      expect(again).toMatchObject({ status: "queued", reason: null, finished_at: null })
      expect((yield* sup.retry(t.task_id).pipe(Effect.flip)).message).toContain("only a failed or cancelled task is tried again")
    }).pipe(Effect.provide(layer))
  })

  it.scoped("an add with a key already used by a task that waits or runs gives that task (20 at once: one task); once it has ended the key is free", () => {
    const { layer } = deployment()
    return Effect.gen(function*() {
      const sup = yield* startSupervisor
      const adds = yield* Effect.all(Array.from({ length: 20 }, () => sup.add({ worker: "alice", prompt: "HANG once", key: "nightly-2026-12-03" })), { concurrency: "unbounded" })
      expect(new Set(adds.map((t) => t.task_id)).size).toBe(1)
      expect(adds.filter((t) => !t.existed)).toHaveLength(1)
      expect((yield* (yield* TaskStore).list).filter((t) => t.key === "nightly-2026-12-03")).toHaveLength(1)
      const first = adds[0]!
      yield* boxOf(first.task_id)
      // Still running: the same task.
      expect(yield* sup.add({ worker: "alice", prompt: "HANG again", key: "nightly-2026-12-03" })).toMatchObject({ task_id: first.task_id, existed: true })
      yield* sup.cancel(first.task_id)
      const after = yield* sup.add({ worker: "alice", prompt: "HANG next", key: "nightly-2026-12-03" })
      expect(after.task_id).not.toBe(first.task_id)
      expect(after.existed).toBeUndefined()
      const bad = yield* sup.add({ worker: "alice", prompt: "x", key: "has space" }).pipe(Effect.flip)
      expect(bad.message).toContain("a key is 1 to 128 printable characters")
    }).pipe(Effect.provide(layer))
  })

  it.scoped("roster server stop puts a running task back to carry on after the next start; --fail-running fails it", () =>
    Effect.gen(function*() {
      for (const failing of [false, true]) {
        const { paths, layer } = deployment()
        yield* Effect.gen(function*() {
          const store = yield* TaskStore
          const after = yield* store.add({ worker: "bob", prompt: "HANG later", ceilingMin: null, after: null, origin: { by: "person", run_id: null, task_id: null } })
          const scope = yield* Scope.make()
          const sup = yield* startSupervisor.pipe(Scope.extend(scope))
          const t = yield* sup.add({ worker: "alice", prompt: "HANG the long one" })
          // A task that waits for it.
          const dependant = yield* sup.add({ worker: "carol", prompt: "after it", after: t.task_id })
          yield* boxOf(t.task_id)
          const first = (yield* store.get(t.task_id))?.run_ids[0]
          if (failing) fs.writeFileSync(layout(paths).stopFailsRunning, "1\n")
          // The daemon stops.
          yield* Scope.close(scope, Exit.void)
          const stopped = yield* store.get(t.task_id)
          if (failing) {
            expect(stopped?.status).toBe("failed")
            expect(stopped?.reason).toMatch(/the daemon stopped while it ran \(its box was killed\)/)
            return
          }
          expect(stopped).toMatchObject({ status: "queued", interrupted: { run_id: first, by: "stop" }, continues: { task_id: t.task_id, run_id: first } })
          expect((yield* store.get(dependant.task_id))?.status).toBe("queued")
          void after
          // The next start: it carries on, and then what waited for it runs.
          yield* startSupervisor
          const box = yield* boxOf(t.task_id)
          expect(box.spec.Cmd.at(-1)).toContain(`Your previous run of this task (${first}) was interrupted at`)
          expect(box.spec.Cmd.at(-1)).toContain("roster's daemon was stopped")
          expect(fs.existsSync(layout(paths).stopFailsRunning)).toBe(false)
        }).pipe(Effect.scoped, Effect.provide(layer))
      }
    }))
})

describe("the supervisor over the Runner's test layer (no engine: what it does with a run's outcome)", () => {
  const failedCall = (req: RunRequest, n: number): RunOutcome => ({ ...exitedOk(req, n), error: "the model call failed: 529 overloaded (stand-in)" })

  it.scoped("a task's run is the Runner's: a task run of its worker with its id, channel and run id; a failed model call is tried again after a doubling backoff, then done", () => {
    const { layer } = deployment("[supervisor]\nconcurrency = 2\nretries = 2\nretry_backoff_s = 30\n", {
      runner: { once: (req, n) => Effect.succeed(n <= 2 ? failedCall(req, n) : exitedOk(req, n, "answered")) }
    })
    return Effect.gen(function*() {
      const sup = yield* startSupervisor
      const t = yield* sup.add({ worker: "alice", prompt: "flaky work", channel: "ops" })
      const calls = yield* RunnerCalls
      const started = (n: number) => eventually(Effect.map(Ref.get(calls), (c) => c.length >= n), `run ${n} started`)
      yield* started(1)
      const first = (yield* Ref.get(calls))[0]
      expect(first?._tag === "once" && first.req).toMatchObject({ worker: "alice", prompt: "flaky work", taskId: t.task_id, channel: "ops", origin: { _tag: "queue", task_id: t.task_id } })
      // Each wait doubles; nothing starts before it has passed.
      for (const [n, wait] of [[2, 30], [3, 60]] as const) {
        yield* eventually(Effect.map(statusOf(t.task_id), (s) => s === "queued"), `attempt ${n - 1} queued again`)
        yield* TestClock.adjust(`${wait - 5} seconds`)
        expect((yield* Ref.get(calls)).length).toBe(n - 1)
        yield* TestClock.adjust("7 seconds")
        yield* started(n)
      }
      yield* waitStatus(t.task_id, "done")
      const done = (yield* (yield* TaskStore).get(t.task_id))!
      expect(done.final_text).toBe("answered")
      expect(done.run_ids).toEqual((yield* Ref.get(calls)).map((c) => (c._tag === "once" ? c.req.runId : "")))
      expect(done.attempts?.map((a) => a.reason !== null)).toEqual([true, true, false])
    }).pipe(Effect.provide(layer))
  })

  it.scoped("a fresh task asks for its worker's warm box with its own limits; a task that continues another's conversation never does (it starts cold)", () => {
    const { layer } = deployment(undefined, { runner: {} })
    return Effect.gen(function*() {
      const sup = yield* startSupervisor
      const first = yield* sup.add({ worker: "alice", prompt: "start something", channel: "ops", ceiling_min: 7 })
      yield* waitStatus(first.task_id, "done")
      expect(yield* Ref.get(yield* WarmAsks)).toEqual([{ worker: "alice", channel: "ops", limits: { ceilingMin: 7 } }])
      // The Runner's test layer writes no record: the run being continued gets one, finished, as a real run leaves it.
      const runId = (yield* (yield* TaskStore).get(first.task_id))?.run_ids[0] ?? ""
      const runLog = yield* RunLog
      yield* runLog.start({ runId, worker: "alice", kind: "task", taskId: first.task_id })
      yield* runLog.finish("alice", runId, { endedBy: "exit", exitCode: 0 })
      const next = yield* sup.add({ worker: "alice", prompt: "carry on", channel: "ops", continue: first.task_id })
      yield* waitStatus(next.task_id, "done")
      const calls = yield* Ref.get(yield* RunnerCalls)
      expect(calls.map((c) => c._tag === "once" && c.req.continues)).toEqual([null, { task_id: first.task_id, run_id: runId }])
      // No second ask: the continuation's box must hold the session it resumes, which no warm box has.
      expect(yield* Ref.get(yield* WarmAsks)).toHaveLength(1)
    }).pipe(Effect.provide(layer))
  })

  it.scoped("a run that could not start (the engine refused its box) is tried again; a run its ceiling ended never is", () => {
    const { layer } = deployment("[supervisor]\nconcurrency = 2\nretries = 3\nretry_backoff_s = 10\n", {
      runner: {
        once: (req, n) =>
          req.worker === "carol"
            ? Effect.succeed({ ...exitedOk(req, n), endedBy: "ceiling", exitCode: null })
            : n === 1 ? Effect.fail(new BlankPrompt()) : Effect.succeed(exitedOk(req, n, "second time"))
      }
    })
    return Effect.gen(function*() {
      const sup = yield* startSupervisor
      const t = yield* sup.add({ worker: "bob", prompt: "anything" })
      yield* eventually(Effect.map((yield* TaskStore).get(t.task_id), (x) => x?.status === "queued" && x.attempts?.length === 1), "the failed start queued again")
      expect((yield* (yield* TaskStore).get(t.task_id))?.attempts?.[0]).toMatchObject({ ended_by: "error", reason: expect.stringContaining("worker run needs a prompt") })
      yield* TestClock.adjust("11 seconds")
      yield* waitStatus(t.task_id, "done")
      const stuck = yield* sup.add({ worker: "carol", prompt: "anything" })
      yield* waitStatus(stuck.task_id, "failed")
      // Well past the backoff it would have had.
      yield* TestClock.adjust("1 minute")
      expect(yield* statusOf(stuck.task_id)).toBe("failed")
      expect((yield* Ref.get(yield* RunnerCalls)).filter((c) => c.req.worker === "carol")).toHaveLength(1)
    }).pipe(Effect.provide(layer))
  })
})

describe("adoption and the reaper (Docker test layer)", () => {
  it.scoped("adopts a task box a dead daemon left: waits for it, then finishes its run and task (adopted)", () => {
    const { paths, layer } = deployment()
    return Effect.gen(function*() {
      const store = yield* TaskStore
      const runId = "2026-11-29-10-00-00-000000a1"
      const t = yield* store.add({ worker: "alice", prompt: "HANG", ceilingMin: null, after: null, origin: { by: "person", run_id: null, task_id: null } })
      yield* store.update(t.task_id, (x, now) => ({ ...x, status: "running", started_at: now, run_ids: [runId] }))
      const id = yield* leftBox(paths, { runId, kind: "task", taskId: t.task_id, owner: { pid: deadPid(), start: "" }, deadline: 60 * 60_000 })
      const sup = yield* startSupervisor
      expect((yield* sup.status).boxes).toMatchObject([{ run_id: runId, held_by: "adopted", task_id: t.task_id }])
      expect(yield* statusOf(t.task_id)).toBe("running")
      // Once the adopter waits on the box, the box exits on its own.
      yield* eventually(Effect.map(Effect.flatMap(DockerFake, (f) => f.callsOf("containerWait")), (ids) => ids.includes(id)), "the adopter's wait")
      yield* (yield* DockerFake).exit(id, 0)
      yield* waitStatus(t.task_id, "done")
      expect(yield* store.get(t.task_id)).toMatchObject({ adopted: true, ended_by: "exit", exit_code: 0 })
      expect(yield* Effect.flatMap(RunLog, (r) => r.read("alice", runId))).toMatchObject({ ended_by: "exit", exit_code: 0, adopted: true })
      expect(tokens(paths)).toEqual([])
      expect((yield* sup.status).adopted).toBe(1)
    }).pipe(Effect.provide(layer))
  })

  it.scoped("an adopted box is killed at its deadline; its task fails at the ceiling", () => {
    const { paths, layer } = deployment()
    return Effect.gen(function*() {
      const store = yield* TaskStore
      const runId = "2026-11-29-10-00-00-000000a2"
      const t = yield* store.add({ worker: "alice", prompt: "HANG", ceilingMin: null, after: null, origin: { by: "person", run_id: null, task_id: null } })
      yield* store.update(t.task_id, (x, now) => ({ ...x, status: "running", started_at: now, run_ids: [runId] }))
      yield* leftBox(paths, { runId, kind: "task", taskId: t.task_id, owner: { pid: deadPid(), start: "" }, deadline: 5 * 60_000 })
      yield* startSupervisor
      expect(yield* running).toHaveLength(1)
      yield* TestClock.adjust("5 minutes")
      yield* waitStatus(t.task_id, "failed")
      expect(yield* running).toEqual([])
      expect((yield* store.get(t.task_id))?.ended_by).toBe("ceiling")
      expect(tokens(paths)).toEqual([])
    }).pipe(Effect.provide(layer))
  })

  it.scoped("reaps a one-shot box whose owner died (a dead pid, and a pid reused by another process)", () => {
    const { paths, layer } = deployment()
    return Effect.gen(function*() {
      const self = yield* currentOwner
      const dead = "2026-11-29-10-00-00-000000b1"
      const reused = "2026-11-29-10-00-00-000000b2"
      const alive = "2026-11-29-10-00-00-000000b3"
      const far = 60 * 60_000
      yield* leftBox(paths, { runId: dead, kind: "box", owner: { pid: deadPid(), start: "" }, deadline: far })
      // Our own pid, but not our start time: the process that owned the box is gone and the kernel reused its pid.
      yield* leftBox(paths, { runId: reused, kind: "box", owner: { pid: self.pid, start: "1" }, deadline: far })
      // A box whose owner lives (another process: a CLI run in progress) is left to it.
      const cli = yield* livingProcess
      yield* leftBox(paths, { runId: alive, kind: "box", owner: { pid: cli.pid, start: yield* processStart(cli.pid) }, deadline: far })
      const sup = yield* startSupervisor
      yield* eventually(Effect.map(sup.status, (s) => s.reaped === 2), "two boxes reaped")
      const live = (yield* running).map((c) => c.spec.Labels["roster.run-id"])
      expect(live).toEqual([alive])
      const runLog = yield* RunLog
      expect(yield* runLog.read("alice", dead)).toMatchObject({ ended_by: "orphaned", adopted: true })
      expect(yield* runLog.read("alice", reused)).toMatchObject({ ended_by: "orphaned" })
      expect((yield* runLog.read("alice", alive))?.finished_at).toBeNull()
    }).pipe(Effect.provide(layer))
  })

  it.scoped("a run killed before its box existed: record finished orphaned, token removed; a run still starting is left alone, and so is a warm box its living daemon is still making", () => {
    const { paths, layer } = deployment()
    const token = (name: string, runId: string, warm?: { readonly maker: { readonly pid: number; readonly start: string } }) => {
      fs.mkdirSync(layout(paths).identityDir, { recursive: true })
      fs.writeFileSync(`${layout(paths).identityDir}/${name.repeat(64)}.json`, JSON.stringify({ subject: "org/alice", run_id: runId, worker: "alice", task_id: null, ...(warm ? { warm: true, ...warm } : {}) }))
    }
    return Effect.gen(function*() {
      const runLog = yield* RunLog
      const killed = "2026-11-29-10-00-00-000000c1"
      const recordOnly = "2026-11-29-10-00-00-000000c2"
      const starting = "2026-11-29-10-00-00-000000c3"
      const over = "2026-11-29-10-00-00-000000c4"
      const cli = yield* livingProcess
      // Killed with -9 after its token was minted (no container yet), and after only its record was written.
      yield* runLog.start({ runId: killed, worker: "alice", kind: "box", owner: { pid: deadPid(), start: "" } })
      token("d", killed)
      yield* runLog.start({ runId: recordOnly, worker: "alice", kind: "box", owner: { pid: deadPid(), start: "" } })
      // Another CLI run, still provisioning: its owner lives.
      yield* runLog.start({ runId: starting, worker: "alice", kind: "box", owner: { pid: cli.pid, start: yield* processStart(cli.pid) } })
      token("e", starting)
      // A token left behind by a run that finished.
      yield* runLog.start({ runId: over, worker: "alice", kind: "box", owner: { pid: cli.pid, start: "" } })
      yield* runLog.finish("alice", over, { endedBy: "exit", exitCode: 0 })
      token("f", over)
      // An identity file that is not one (a stray write): no run can use it.
      fs.writeFileSync(`${layout(paths).identityDir}/${"9".repeat(64)}.json`, "{")
      // Warm boxes' tokens, written before their boxes exist (no box, no record): one whose maker lives
      // is a box still being made (under gVisor that takes seconds); one whose maker died is a stray, its folder too.
      const making = "2026-11-29-10-00-00-000000c5"
      const orphanedWarm = "2026-11-29-10-00-00-000000c6"
      token("a", making, { maker: { pid: cli.pid, start: yield* processStart(cli.pid) } })
      token("b", orphanedWarm, { maker: { pid: deadPid(), start: "" } })
      for (const id of [making, orphanedWarm]) fs.mkdirSync(layout(paths).runDir("alice", id), { recursive: true })
      yield* startSupervisor
      expect(yield* runLog.read("alice", killed)).toMatchObject({ ended_by: "orphaned", error: expect.stringContaining("died before the run's box was started") })
      expect(yield* runLog.read("alice", recordOnly)).toMatchObject({ ended_by: "orphaned" })
      expect((yield* runLog.read("alice", starting))?.finished_at).toBeNull()
      expect(tokens(paths).sort()).toEqual([`${"a".repeat(64)}.json`, `${"e".repeat(64)}.json`])
      expect(fs.existsSync(layout(paths).runDir("alice", making))).toBe(true)
      expect(fs.existsSync(layout(paths).runDir("alice", orphanedWarm))).toBe(false)
      expect((yield* Effect.flatMap(DockerFake, (f) => Effect.succeed([...f.containers.values()])))).toEqual([])
    }).pipe(Effect.provide(layer))
  })

  it.scoped("kills a box whose ceiling passed even while its owner lives; a box with no run record is killed and reported", () => {
    const { paths, layer } = deployment()
    return Effect.gen(function*() {
      const cli = yield* livingProcess
      yield* leftBox(paths, { runId: "2026-11-29-10-00-00-000000c1", kind: "box", owner: { pid: cli.pid, start: "" }, deadline: 60_000 })
      const docker = yield* Docker
      const stray = yield* docker.containerCreate({
        name: "roster-box-stray", Image: "roster-box:1", Cmd: ["HANG"], Env: [],
        Labels: { "roster.run-id": "2026-11-29-10-00-00-000000c2", "roster.worker": "alice", "roster.kind": "box", "roster.deployment": paths.config },
        User: "1:1", WorkingDir: "/", OpenStdin: false, StdinOnce: false, AttachStdin: false, AttachStdout: true, AttachStderr: true, Tty: false,
        HostConfig: { AutoRemove: true, NetworkMode: "roster-locked", ExtraHosts: [], Dns: [], CapDrop: ["ALL"], SecurityOpt: [], Tmpfs: {}, Binds: [] }
      })
      yield* docker.containerStart(stray)
      const sup = yield* startSupervisor
      // The stray has no record and no owner: killed at once.
      yield* eventually(Effect.map(running, (cs) => cs.length === 1), "the stray box killed")
      // A step at a time: each reaper pass reads /proc (a real read) before the next sleep is set.
      yield* eventually(TestClock.adjust("3 seconds").pipe(Effect.zipRight(Effect.map(running, (cs) => cs.length === 0))), "the box past its ceiling killed")
      expect((yield* sup.status).reaped).toBe(2)
    }).pipe(Effect.provide(layer))
  })

  it.scoped("a box of this daemon's own past its ceiling is removed, even one never started (a create answered after its run was stopped); one within it is left", () => {
    const { paths, layer } = deployment()
    return Effect.gen(function*() {
      const self = yield* currentOwner
      const docker = yield* Docker
      const box = (runId: string, deadline: number) =>
        docker.containerCreate({
          name: `roster-box-${runId}`, Image: "roster-box:1", Cmd: ["HANG"], Env: [],
          Labels: {
            "roster.run-id": runId, "roster.worker": "alice", "roster.kind": "box", "roster.deployment": paths.config,
            "roster.deadline": String(deadline), "roster.owner-pid": String(self.pid), "roster.owner-start": self.start
          },
          User: "1:1", WorkingDir: "/", OpenStdin: false, StdinOnce: false, AttachStdin: false, AttachStdout: true, AttachStderr: true, Tty: false,
          HostConfig: { AutoRemove: true, NetworkMode: "roster-locked", ExtraHosts: [], Dns: [], CapDrop: ["ALL"], SecurityOpt: [], Tmpfs: {}, Binds: [] }
        })
      const leaked = yield* box("2026-11-29-10-00-00-000000d1", 60_000)
      const within = yield* box("2026-11-29-10-00-00-000000d2", 3_600_000)
      const fake = yield* DockerFake
      const sup = yield* startSupervisor
      yield* eventually(TestClock.adjust("3 seconds").pipe(Effect.zipRight(Effect.sync(() => fake.containers.get(leaked)?.state === "removed"))), "the leaked box removed")
      expect(fake.containers.get(within)?.state).toBe("created")
      expect((yield* sup.status).reaped).toBe(1)
    }).pipe(Effect.provide(layer))
  })
})

describe("a box's owner", () => {
  it.effect("counts as alive while its start time cannot be read (a box is reaped only for an owner surely gone)", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    return Effect.gen(function*() {
      const child = spawn("sleep", ["30"], { stdio: "ignore" })
      try {
        const pid = child.pid ?? -1
        const start = yield* processStart(pid)
        expect(start).toMatch(/^\d+$/)
        expect(yield* ownerAlive({ pid, start })).toBe(true)
        expect(yield* ownerAlive({ pid, start: "1" })).toBe(false)
      } finally {
        child.kill("SIGKILL")
      }
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.effect("with /proc unreadable, a live pid is not taken for a dead owner", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const layer = unitLayer(paths, {
      fs: (real) => ({
        readFileString: (file, encoding) =>
          file.startsWith("/proc/") ? Effect.fail(new SystemError({ reason: "Unknown", module: "FileSystem", method: "readFileString", pathOrDescriptor: file, description: "EMFILE" })) : real.readFileString(file, encoding)
      })
    })
    return Effect.gen(function*() {
      expect(yield* ownerAlive({ pid: process.pid, start: "12345" })).toBe(true)
    }).pipe(Effect.provide(layer))
  })
})

describe("a person's run on a fleet node (Runner.direct)", () => {
  it.live("holds its worker's box row fleet-wide: it waits, saying so, while another box of the worker runs anywhere; the row is given back when it ends", () => {
    const paths = tempPaths()
    writeFixture({ paths, workers: ["alice"] })
    const taken: Array<string> = []
    const given: Array<string> = []
    let refusals = 2
    const member = fakeMember({
      takeBox: (worker, key) => Effect.sync(() => (refusals-- > 0 ? false : (taken.push(`${worker} ${key}`), true))),
      giveBox: (worker, key) => Effect.sync(() => void given.push(`${worker} ${key}`))
    })
    const said: Array<string> = []
    // A Runner built on a fleet node: the daemon's services, with its FleetMember (fresh: the one unitLayer holds has none).
    const layer = Layer.fresh(Runner.layer).pipe(Layer.provide(Layer.merge(unitLayer(paths, { docker: { script: () => ({ exitCode: 0 }) } }), member)))
    return Effect.gen(function*() {
      const code = yield* (yield* Runner).direct({ worker: "alice", prompt: "hello", channel: null }, {
        say: () => Effect.void,
        colour: false,
        reporter: { report: (r) => Effect.sync(() => void (r._tag === "Notice" && said.push(r.text))) }
      })
      expect(code).toBe(0)
      expect(said).toEqual(["alice has a box running in the fleet (one box per worker): this run starts when it ends"])
      expect(taken).toHaveLength(1)
      expect(taken[0]).toMatch(/^alice direct:[0-9a-f]{12}$/)
      expect(given).toEqual(taken)
    }).pipe(Effect.provide(layer))
  })
})
