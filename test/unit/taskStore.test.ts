import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Logger } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { layout } from "../../src/config/Paths.js"
import { type NewTask, TaskStore } from "../../src/task/TaskStore.js"
import type { TaskRecord } from "../../src/task/TaskRecord.js"
import { queueTask, retryTask } from "../../src/supervisor/queueTask.js"
import { tempPaths, unitLayer, writeFixture } from "../support/harness.js"

const person = { by: "person" as const, run_id: null, task_id: null }

describe("the task store", () => {
  it.live("serves a repeated list from memory, and sees a record another process wrote", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    return Effect.gen(function*() {
      const store = yield* TaskStore
      const first = yield* store.add({ worker: "alice", prompt: "one", ceilingMin: null, after: null, origin: person })
      expect((yield* store.list).map((t) => t.task_id)).toEqual([first.task_id])
      // Another process (the CLI while the daemon was down) writes a record: a rename into the folder.
      yield* Effect.sleep("5 millis")
      const file = layout(paths).taskFile("t-0000beef")
      fs.writeFileSync(`${file}.tmp`, JSON.stringify({ ...first, task_id: "t-0000beef", seq: 2, prompt: "two" }))
      fs.renameSync(`${file}.tmp`, file)
      expect((yield* store.list).map((t) => t.prompt)).toEqual(["one", "two"])
      // This store's own change is seen at once, even within the same millisecond.
      yield* store.update(first.task_id, (t) => ({ ...t, status: "cancelled" }))
      expect((yield* store.list)[0]?.status).toBe("cancelled")
    }).pipe(Effect.provide(TaskStore.layer.pipe(Layer.provideMerge(unitLayer(paths)))))
  })
})

describe("a task record roster cannot read", () => {
  const good = (id: string) => ({
    task_id: id, worker: "alice", prompt: "p", status: "queued", seq: 1, ceiling_min: null, after: null,
    origin: { by: "person", run_id: null, task_id: null }, created_at: "2026-12-01T00:00:00.000Z", updated_at: "2026-12-01T00:00:00.000Z",
    started_at: null, finished_at: null, run_ids: [], ended_by: null, exit_code: null, reason: null
  })
  const damaged: Record<string, string> = {
    "t-0000000a": "\u0000\u00ffnot json at all",
    "t-0000000b": JSON.stringify({ ...good("t-0000000b"), status: "sleeping" }),
    "t-0000000c": "",
    "t-0000000d": JSON.stringify(good("t-0000000d")).slice(0, 60),
    "t-0000000e": JSON.stringify({ ...good("t-0000000e"), worker: "../../../x" })
  }

  it.live("garbage, a wrong schema, an empty, a truncated file and a traversal name: each listed as failed, kept aside, shown, said once", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const files = layout(paths)
    fs.mkdirSync(files.tasksDir, { recursive: true })
    for (const [id, text] of Object.entries(damaged)) fs.writeFileSync(files.taskFile(id), text)
    fs.writeFileSync(files.taskFile("t-000000ff"), JSON.stringify(good("t-000000ff")))
    const logged: Array<string> = []
    const logger = Logger.make(({ message }) => logged.push(String(Array.isArray(message) ? message.join(" ") : message)))
    return Effect.gen(function*() {
      const store = yield* TaskStore
      const listed = yield* store.list
      expect(listed.map((t) => t.task_id).sort()).toEqual([...Object.keys(damaged), "t-000000ff"].sort())
      for (const id of Object.keys(damaged)) {
        const t = listed.find((x) => x.task_id === id)
        expect(t?.status, id).toBe("failed")
        expect(t?.reason, id).toMatch(/^record unreadable: /)
        // The file is kept aside exactly as it was, and the reason says where.
        const aside = t?.unreadable?.file ?? ""
        expect(t?.reason).toContain(aside)
        expect(fs.readFileSync(aside, "utf8"), id).toBe(damaged[id])
        expect(fs.existsSync(files.taskFile(id)), id).toBe(false)
        // task show finds it.
        expect((yield* store.get(id))?.unreadable?.file, id).toBe(aside)
      }
      expect(listed.find((t) => t.task_id === "t-0000000c")?.reason).toContain("the file is empty")
      expect(listed.find((t) => t.task_id === "t-0000000e")?.reason).toContain(`"../../../x" is not a worker name`)
      expect(listed.find((t) => t.task_id === "t-0000000e")?.worker).toBe("unknown")
      expect(listed.find((t) => t.task_id === "t-0000000b")?.worker).toBe("alice")
      // Listed again (a new process's cache would be empty too): the same, and said only once each.
      expect((yield* store.list).length).toBe(6)
      expect(logged.filter((l) => l.includes("record unreadable"))).toHaveLength(5)
      // Never rewritten by a change, never run: a cancel leaves it as it is.
      const kept = yield* store.update("t-0000000a", (t) => ({ ...t, status: "cancelled" }))
      expect(kept.status).toBe("failed")
      // Nothing was written outside the deployment's roots for the traversal name.
      expect(fs.existsSync(path.resolve(files.journalFile("alice"), "..", "..", "..", "x.jsonl"))).toBe(false)
      expect(fs.readdirSync(path.join(paths.data, "tasks")).sort()).toEqual(["records", "unreadable"])
      // A new task never takes the id of one put aside.
      const added = yield* store.add({ worker: "alice", prompt: "new", ceilingMin: null, after: null, origin: person })
      expect(Object.keys(damaged)).not.toContain(added.task_id)
    }).pipe(
      Effect.provide(TaskStore.layer.pipe(Layer.provideMerge(unitLayer(paths)))),
      Effect.provide(Logger.replace(Logger.defaultLogger, logger))
    )
  })

  it.live("a record filed under another task's id is put aside too", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const files = layout(paths)
    fs.mkdirSync(files.tasksDir, { recursive: true })
    fs.writeFileSync(path.join(files.tasksDir, "garbage.json"), JSON.stringify(good("t-00000001")))
    return Effect.gen(function*() {
      const [t] = yield* (yield* TaskStore).list
      expect(t).toMatchObject({ status: "failed", worker: "alice" })
      expect(t?.reason).toContain("it names task t-00000001 but is filed as garbage.json")
      expect(t?.task_id).toMatch(/^t-[0-9a-f]{8}$/)
    }).pipe(Effect.provide(TaskStore.layer.pipe(Layer.provideMerge(unitLayer(paths)))))
  })
})

describe("the task list cache", () => {
  it.live("a write that lands while a list is reading is in the next list (the cache keeps the stamp from before its read)", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    // The next record read is slow: the list that makes it is still reading when the write lands.
    let slow = false
    const layer = TaskStore.layer.pipe(Layer.provideMerge(unitLayer(paths, {
      fs: (real) => ({
        readFileString: (p, enc) => {
          if (!slow || !p.includes(`${path.sep}records${path.sep}`)) return real.readFileString(p, enc)
          slow = false
          return Effect.sleep("150 millis").pipe(Effect.zipRight(real.readFileString(p, enc)))
        }
      })
    })))
    return Effect.gen(function*() {
      const store = yield* TaskStore
      const first = yield* store.add({ worker: "alice", prompt: "one", ceilingMin: null, after: null, origin: person })
      // Another process's write, so this store's cache must read the folder again.
      yield* Effect.sleep("5 millis")
      fs.utimesSync(layout(paths).tasksDir, new Date(), new Date())
      slow = true
      const reading = yield* Effect.fork(store.list)
      yield* Effect.sleep("30 millis")
      const second = yield* store.add({ worker: "alice", prompt: "two", ceilingMin: null, after: null, origin: person })
      yield* reading
      expect((yield* store.list).map((t) => t.task_id)).toEqual([first.task_id, second.task_id])
    }).pipe(Effect.provide(layer))
  })
})

describe("finished tasks past keep_days", () => {
  const day = 86_400_000
  const t0 = Date.parse("2026-12-01T00:00:00.000Z")
  const ended = (status: "done" | "failed", daysAgo: number) => (t: TaskRecord, now: string): TaskRecord => ({
    ...t, status, finished_at: new Date(t0 - daysAgo * day).toISOString(), updated_at: now
  })

  it.live("leave the live list for the archive — but not one a waiting task needs, nor one whose answer is undelivered; show and --continue still find them", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    return Effect.gen(function*() {
      const store = yield* TaskStore
      const add = (prompt: string, more: Partial<NewTask> = {}) => store.add({ worker: "alice", prompt, ceilingMin: null, after: null, origin: person, ...more })
      const old = yield* add("old and done")
      const needed = yield* add("old, and a queued task waits on it")
      const owed = yield* add("old, its answer not yet delivered", { replyTo: `task:${old.task_id}` })
      const recent = yield* add("done yesterday")
      yield* store.update(old.task_id, (t) => ({ ...ended("done", 40)(t, t.updated_at), run_ids: ["2026-10-22-00-00-00-0000abcd"] }))
      yield* store.update(needed.task_id, ended("done", 40))
      yield* store.update(owed.task_id, ended("failed", 40))
      yield* store.update(recent.task_id, ended("done", 1))
      const waiting = yield* add("after the needed one", { after: needed.task_id })

      expect(yield* store.archive(t0 - 30 * day)).toBe(1)
      expect((yield* store.list).map((t) => t.task_id)).toEqual([needed.task_id, owed.task_id, recent.task_id, waiting.task_id])
      expect(yield* store.get(old.task_id)).toBeUndefined()
      expect(yield* store.getArchived(old.task_id)).toMatchObject({ task_id: old.task_id, status: "done", archived: true })
      expect((yield* store.listArchived).map((t) => t.task_id)).toEqual([old.task_id])
      // Filed by the month it ended in; nothing left in the records folder.
      expect(fs.existsSync(path.join(layout(paths).tasksArchiveDir, "2026-10", `${old.task_id}.json`))).toBe(true)
      expect(fs.existsSync(layout(paths).taskFile(old.task_id))).toBe(false)
      // Moving again moves nothing more: the same cutoff, the same live list.
      expect(yield* store.archive(t0 - 30 * day)).toBe(0)

      // A person carries an archived task on: from its last run alone (its record is never changed again).
      const next = yield* queueTask({ worker: "alice", prompt: "carry on", continue: old.task_id }, person)
      expect(next.continues).toEqual({ task_id: null, run_id: "2026-10-22-00-00-00-0000abcd" })
      expect((yield* store.getArchived(old.task_id))?.continued_by).toBeUndefined()
      // --after an archived task that was done: nothing to wait for.
      expect((yield* queueTask({ worker: "alice", prompt: "then", after: old.task_id }, person)).after).toBeNull()
      // roster task retry of an archived task says how to carry it on instead.
      const refused = yield* Effect.flip(retryTask(old.task_id, () => Effect.succeed(true)))
      expect(refused.message).toContain(`roster task add alice --continue ${old.task_id}`)
    }).pipe(Effect.provide(TaskStore.layer.pipe(Layer.provideMerge(unitLayer(paths)))))
  })
})
