import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import { layout } from "../../src/config/Paths.js"
import { TaskStore } from "../../src/task/TaskStore.js"
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
