import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, TestClock } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { recentWorkers } from "../../src/box/recentWorkers.js"
import { layout, Paths } from "../../src/config/Paths.js"
import { tempPaths } from "../support/harness.js"

const NOW = Date.parse("2026-12-06T12:00:00.000Z")
const minutesAgo = (m: number) => new Date(NOW - m * 60_000).toISOString()
/** A run id stamped `m` minutes before now. */
const idAt = (m: number, tail: string) => `${minutesAgo(m).slice(0, 19).replace(/[T:]/g, "-")}-${tail}`

describe("the workers that get a warm box at the daemon's start", () => {
  it.effect("are those whose last run ended within warm_idle_min, most recent first, at most warm_max; an untaken warm box's folder is not a run", () => {
    const paths = tempPaths()
    const run = (worker: string, startedMin: number, endedMin: number | null, tail: string) => {
      const id = idAt(startedMin, tail)
      const dir = layout(paths).runDir(worker, id)
      fs.mkdirSync(dir, { recursive: true })
      fs.writeFileSync(path.join(dir, "run.json"), JSON.stringify({
        run_id: id, worker, kind: "box", task_id: null, started_at: minutesAgo(startedMin),
        finished_at: endedMin === null ? null : minutesAgo(endedMin), ended_by: endedMin === null ? null : "exit", exit_code: endedMin === null ? null : 0, error: null
      }))
    }
    // alice ended 5 minutes ago; bob 40 (past the 30); carol 1, and a warm box made after it that no run took
    // (a folder with no record, newer than her run); dave's last run still runs; erin's last ended 2 minutes ago,
    // after an older one that ended long before.
    run("alice", 6, 5, "0000000a")
    run("bob", 41, 40, "0000000b")
    run("carol", 2, 1, "0000000c")
    fs.mkdirSync(path.join(layout(paths).runDir("carol", idAt(0.5, "0000c0c0")), "home"), { recursive: true })
    run("dave", 3, null, "0000000d")
    run("erin", 90, 85, "0000000e")
    run("erin", 3, 2, "000000e2")
    return Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      expect(yield* recentWorkers(30, 5)).toEqual(["carol", "erin", "alice"])
      expect(yield* recentWorkers(30, 2)).toEqual(["carol", "erin"])
      expect(yield* recentWorkers(3, 5)).toEqual(["carol", "erin"])
      expect(yield* recentWorkers(60, 5)).toEqual(["carol", "erin", "alice", "bob"])
    }).pipe(Effect.provide(Layer.mergeAll(NodeContext.layer, Paths.layerAt(paths))))
  })

  it.effect("on a fleet node, only the workers whose last run was this node's", () => {
    const paths = tempPaths()
    const run = (worker: string, node: string, tail: string) => {
      const id = idAt(3, tail)
      const dir = layout(paths).runDir(worker, id)
      fs.mkdirSync(dir, { recursive: true })
      fs.writeFileSync(path.join(dir, "run.json"), JSON.stringify({
        run_id: id, worker, kind: "task", task_id: null, started_at: minutesAgo(3), finished_at: minutesAgo(2), ended_by: "exit", exit_code: 0, error: null, node
      }))
    }
    run("alice", "node-a", "0000000a")
    run("bob", "node-b", "0000000b")
    const nodeB = { ...paths, fleet: { node: "node-b", shared: paths.data } }
    return Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      expect(yield* recentWorkers(30, 5)).toEqual(["bob"])
    }).pipe(Effect.provide(Layer.mergeAll(NodeContext.layer, Paths.layerAt(nodeB))))
  })
})
