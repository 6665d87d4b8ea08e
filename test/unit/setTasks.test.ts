import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import { layout } from "../../src/config/Paths.js"
import { setTasks } from "../../src/gateway/actions/setTasks.js"
import { RunLog } from "../../src/run/RunLog.js"
import { TaskStore } from "../../src/task/TaskStore.js"
import { chargedChannel } from "../../src/contract/origin.js"
import { tempPaths, unitLayer, writeFixture } from "../support/harness.js"

const RUN = "2026-11-29-10-00-00-0000f00d"

const deployment = () => {
  const paths = tempPaths()
  writeFixture({ paths, orgToml: "[supervisor]\nmax_self_tasks = 2\n", workers: ["alice", "bob"] })
  return { paths, layer: TaskStore.layer.pipe(Layer.provideMerge(unitLayer(paths))) }
}

const alice = { subject: "org/alice", runId: RUN, worker: "alice", taskId: null }
const body = (tasks: ReadonlyArray<Record<string, unknown>>, extra: Record<string, unknown> = {}) => JSON.stringify({ tasks, ...extra })

describe("set_tasks: a worker queues follow-ups for itself (gateway action)", () => {
  it.effect("queues them for the caller, with the run as their origin, noted in the run record and the worker's view", () => {
    const { paths, layer } = deployment()
    return Effect.gen(function*() {
      yield* (yield* RunLog).start({ runId: RUN, worker: "alice", kind: "box" })
      const answer = yield* setTasks(alice, body([{ prompt: "tidy the notes" }, { prompt: "then summarise", ceiling_min: 5 }]))
      expect(answer.status).toBe(200)
      const queued = (answer.body as { queued: Array<string> }).queued
      expect(queued).toHaveLength(2)
      const tasks = yield* (yield* TaskStore).list
      expect(tasks.map((t) => [t.worker, t.prompt, t.status, t.origin])).toEqual([
        ["alice", "tidy the notes", "queued", { by: "self", run_id: RUN, task_id: null }],
        ["alice", "then summarise", "queued", { by: "self", run_id: RUN, task_id: null }]
      ])
      expect((yield* (yield* RunLog).read("alice", RUN))?.queued_tasks).toEqual(queued)
      // The worker's read-only queue (its /pihome/self/schedule.json) shows them; the journal has a line each.
      const view = JSON.parse(fs.readFileSync(layout(paths).tasksView("alice"), "utf8")) as { tasks: Array<{ task_id: string }> }
      expect(view.tasks.map((t) => t.task_id)).toEqual(queued)
      const journal = fs.readFileSync(layout(paths).journalFile("alice"), "utf8").trim().split("\n").map((l) => JSON.parse(l))
      expect(journal.filter((l) => l.kind === "task" && l.status === "queued")).toHaveLength(2)
    }).pipe(Effect.provide(layer))
  })

  it.effect("work a chat session queues is charged to its channel too, and so is the work that work queues", () => {
    const { layer } = deployment()
    return Effect.gen(function*() {
      yield* (yield* RunLog).start({ runId: RUN, worker: "alice", kind: "session" })
      const answer = yield* setTasks({ ...alice, chatChannel: "slack:c0team" }, body([{ prompt: "look later" }]))
      expect(answer.status).toBe(200)
      const [task] = yield* (yield* TaskStore).list
      expect(task?.origin).toEqual({ by: "self", run_id: RUN, task_id: null, chat_channel: "slack:c0team" })
      // Its run is charged to the channel (its token will say so to the gateway's meter).
      expect(chargedChannel({ _tag: "queue", task_id: task!.task_id, queued_by: task!.origin })).toBe("slack:c0team")
      // A run charged to none queues work charged to none.
      yield* setTasks(alice, body([{ prompt: "mine alone" }]))
      const mine = (yield* (yield* TaskStore).list).find((t) => t.prompt === "mine alone")
      expect(mine?.origin.chat_channel).toBeUndefined()
    }).pipe(Effect.provide(layer))
  })

  it.effect("refuses tasks for another worker, and an `after` that is not the caller's", () => {
    const { layer } = deployment()
    return Effect.gen(function*() {
      const other = yield* setTasks(alice, body([{ prompt: "do bob's work" }], { worker: "bob" }))
      expect(other.status).toBe(403)
      expect(JSON.stringify(other.body)).toMatch(/only for itself/)
      const bobs = yield* (yield* TaskStore).add({ worker: "bob", prompt: "x", ceilingMin: null, after: null, origin: { by: "person", run_id: null, task_id: null } })
      const after = yield* setTasks(alice, body([{ prompt: "after bob", after: bobs.task_id }]))
      expect(after.status).toBe(400)
      expect((yield* (yield* TaskStore).list).filter((t) => t.worker === "alice")).toEqual([])
    }).pipe(Effect.provide(layer))
  })

  it.effect("honours [supervisor] max_self_tasks: never more waiting at once, even from calls at the same time", () => {
    const { layer } = deployment()
    return Effect.gen(function*() {
      const answers = yield* Effect.all(
        [1, 2, 3].map((n) => setTasks(alice, body([{ prompt: `follow-up ${n}` }]))),
        { concurrency: "unbounded" }
      )
      expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 429])
      expect(JSON.stringify(answers.find((a) => a.status === 429)?.body)).toMatch(/max_self_tasks/)
      expect((yield* (yield* TaskStore).list)).toHaveLength(2)
      // A person's tasks do not count against the worker's own.
      yield* (yield* TaskStore).add({ worker: "alice", prompt: "from a person", ceilingMin: null, after: null, origin: { by: "person", run_id: null, task_id: null } })
      expect((yield* setTasks(alice, body([{ prompt: "one more" }]))).status).toBe(429)
    }).pipe(Effect.provide(layer))
  })

  it.effect("a keyed follow-up whose key a waiting task holds is that task: no twin, no second slot of max_self_tasks", () => {
    const { layer } = deployment()
    return Effect.gen(function*() {
      yield* (yield* RunLog).start({ runId: RUN, worker: "alice", kind: "box" })
      const first = yield* setTasks(alice, body([{ prompt: "check the build", key: "build-check" }]))
      const again = yield* setTasks(alice, body([{ prompt: "check the build", key: "build-check" }, { prompt: "other" }]))
      expect(again.status).toBe(200)
      const [one] = (first.body as { queued: Array<string> }).queued
      const [same, other] = (again.body as { queued: Array<string> }).queued
      expect(same).toBe(one)
      expect(other).not.toBe(one)
      expect((yield* (yield* TaskStore).list).map((t) => t.prompt)).toEqual(["check the build", "other"])
    }).pipe(Effect.provide(layer))
  })

  it.effect("a key is the worker's own: another worker's task under it neither answers the box nor is said to exist, and a person's add for that worker is its own", () => {
    const { layer } = deployment()
    return Effect.gen(function*() {
      yield* (yield* RunLog).start({ runId: RUN, worker: "alice", kind: "box" })
      const store = yield* TaskStore
      const person = { by: "person" as const, run_id: null, task_id: null }
      const bobs = yield* store.add({ worker: "bob", prompt: "bob's nightly", ceilingMin: null, after: null, origin: person, key: "nightly-12-08" })
      // The box asks for the key bob holds: it queues its own task, and learns nothing of bob's.
      const answer = yield* setTasks(alice, body([{ prompt: "alice's nightly", key: "nightly-12-08" }]))
      expect(answer.status).toBe(200)
      const [mine] = (answer.body as { queued: Array<string> }).queued
      expect(mine).not.toBe(bobs.task_id)
      expect((yield* store.get(mine!))?.worker).toBe("alice")
      // A person's add for bob under the key alice's box now holds is bob's own task (bob's still waits: that one).
      const again = yield* store.add({ worker: "bob", prompt: "bob's nightly", ceilingMin: null, after: null, origin: person, key: "nightly-12-08" })
      expect(again.task_id).toBe(bobs.task_id)
      const carol = yield* store.add({ worker: "carol", prompt: "carol's", ceilingMin: null, after: null, origin: person, key: "nightly-12-08" })
      expect(carol.existed).toBeFalsy()
      expect(carol.task_id).not.toBe(bobs.task_id)
      expect(carol.task_id).not.toBe(mine)
    }).pipe(Effect.provide(layer))
  })

  it.effect("refuses a body that is not tasks", () => {
    const { layer } = deployment()
    return Effect.gen(function*() {
      expect((yield* setTasks(alice, "not json")).status).toBe(400)
      expect((yield* setTasks(alice, body([{ prompt: "" }]))).status).toBe(400)
      expect((yield* setTasks(alice, body([{ prompt: "x", ceiling_min: -1 }]))).status).toBe(400)
    }).pipe(Effect.provide(layer))
  })
})
