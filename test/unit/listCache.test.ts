import { describe, expect, it } from "@effect/vitest"
import { NodeFileSystem } from "@effect/platform-node"
import { FileSystem } from "@effect/platform"
import { Deferred, Effect, Fiber } from "effect"
import * as fs from "node:fs"
import { layout } from "../../src/config/Paths.js"
import { makeListCache } from "../../src/task/listCache.js"
import type { TaskRecord } from "../../src/task/TaskRecord.js"
import { tempPaths } from "../support/harness.js"

const task = (status: TaskRecord["status"]) => ({ task_id: "t-0000a11c", seq: 1, status, unreadable: undefined }) as unknown as TaskRecord

// A list read beside a write (the store's reads take no lock) and kept after it held a task as it was before
// the write; every later write folded into that stale list and stamped it anew, so the daemon saw a task done
// on disk as running for good, and its worker's queued tasks never started (resume.e2e, once in a loaded run).
describe("the task list's cache", () => {
  it.live("a list read before a write and finished after it never replaces what the write folded in", () =>
    Effect.gen(function*() {
      const paths = tempPaths()
      const f = layout(paths)
      fs.mkdirSync(f.tasksDir, { recursive: true })
      let onDisk = task("running")
      const slowRead = yield* Deferred.make<void>()
      let reads = 0
      const readAll = () =>
        Effect.gen(function*() {
          reads++
          const seen = onDisk
          // The second read sees the record before the write, and finishes after it.
          if (reads === 2) yield* Deferred.await(slowRead)
          return [seen]
        })
      const cache = yield* makeListCache(yield* FileSystem.FileSystem, f, readAll)
      // Settled: the folder changed over a second ago (a list kept then is trusted until the folder changes).
      const old = new Date(Date.now() - 5_000)
      fs.utimesSync(f.tasksDir, old, old)
      expect((yield* cache.list).map((t) => t.status)).toEqual(["running"])
      // Something changes the folder; a list starts reading it.
      fs.utimesSync(f.tasksDir, new Date(Date.now() - 4_000), new Date(Date.now() - 4_000))
      const reading = yield* Effect.fork(cache.list)
      yield* Effect.sleep("20 millis")
      // The store writes the task done (its record replaced in place: the folder's stamp does not move) and folds it in.
      onDisk = task("done")
      yield* cache.remember(onDisk)
      yield* Deferred.succeed(slowRead, undefined)
      expect((yield* Fiber.join(reading)).map((t) => t.status)).toEqual(["running"])
      // The read that began before the write is not kept: the list says what the write said.
      expect((yield* cache.list).map((t) => t.status)).toEqual(["done"])
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.live("a list of a folder changed within the last second is read again the next time", () =>
    Effect.gen(function*() {
      const paths = tempPaths()
      const f = layout(paths)
      fs.mkdirSync(f.tasksDir, { recursive: true })
      let reads = 0
      const cache = yield* makeListCache(yield* FileSystem.FileSystem, f, () => Effect.sync(() => (reads++, [task("queued")])))
      yield* cache.list
      yield* cache.list
      expect(reads).toBe(2)
      const old = new Date(Date.now() - 5_000)
      fs.utimesSync(f.tasksDir, old, old)
      yield* cache.list
      yield* cache.list
      expect(reads).toBe(3)
    }).pipe(Effect.provide(NodeFileSystem.layer)))
})
