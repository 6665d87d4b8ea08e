import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Paths } from "../../src/config/Paths.js"
import { LABEL_DEPLOYMENT, LABEL_RUN_ID } from "../../src/contract/constants.js"
import { Docker } from "../../src/docker/Docker.js"
import { makeDockerTest } from "../../src/docker/DockerTest.js"
import { statsOf } from "../../src/docker/engineAnswers.js"
import { boxReadings } from "../../src/web/nowHub.js"
import { nowFragment } from "../../src/web/nowPage.js"
import { testEngine } from "../support/harness.js"

const RUNS = { fine: "2026-12-07-09-00-00-0000f1e0", stopping: "2026-12-07-09-00-00-00005709", odd: "2026-12-07-09-00-00-000000dd" }

describe("the Now page with a box whose engine stats are odd", () => {
  it("a sample without CPU figures (a box stopping, gVisor) reads as absent, not as a crash; one that cannot be read is that box's error", () =>
    Effect.gen(function*() {
      expect(yield* statsOf({ memory_stats: { usage: 1_048_576 } })).toEqual({ cpuPercent: undefined, memoryBytes: 1_048_576 })
      expect(yield* statsOf({ cpu_stats: {}, precpu_stats: {}, memory_stats: {} })).toEqual({ cpuPercent: undefined, memoryBytes: undefined })
      const odd = yield* Effect.flip(statsOf({ cpu_stats: "not a sample" }))
      expect(odd.message).toMatch(/the engine's answer could not be read/)
    }))

  it.effect("renders every box: the odd one says so on its own row, the others keep their figures", () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), "roster-now-"))
    const paths = Paths.fromEnv({ ROSTER_HOME: home, HOME: home })
    const docker = makeDockerTest({
      // Boxes that run until killed: the engine gives stats of a running box only.
      script: () => ({ hang: true }),
      stats: (c) => {
        const run = c.spec.Labels?.[LABEL_RUN_ID]
        if (run === RUNS.stopping) return { memory_stats: { usage: 8 * 1024 * 1024 } }
        if (run === RUNS.odd) return { cpu_stats: { cpu_usage: "lots" } }
        return undefined
      }
    })
    return Effect.gen(function*() {
      const engine = yield* Docker
      for (const runId of Object.values(RUNS)) {
        const id = yield* engine.containerCreate({
          name: `roster-box-${runId}`, Image: "roster-box:1", HostConfig: { AutoRemove: false }, Labels: { [LABEL_RUN_ID]: runId, [LABEL_DEPLOYMENT]: paths.config, "roster.worker": "alice", "roster.kind": "box" }
        } as unknown as Parameters<typeof engine.containerCreate>[0])
        yield* engine.containerStart(id)
      }
      const stats = yield* boxReadings(Object.values(RUNS))
      expect(stats.get(RUNS.fine)).toEqual({ cpuPercent: 1.5, memoryBytes: 32 * 1024 * 1024 })
      expect(stats.get(RUNS.stopping)).toEqual({ cpuPercent: undefined, memoryBytes: 8 * 1024 * 1024 })
      expect(stats.get(RUNS.odd)).toMatchObject({ unreadable: expect.stringMatching(/could not be read/) })
      const box = (runId: string) => ({ run_id: runId, worker: "alice", kind: "box", task_id: null, held_by: "cli", age_s: 5, remaining_s: 60 })
      const status = { pid: 1, version: "test", started_at: "2026-12-07T09:00:00Z", adopted: 0, reaped: 0, queue: {}, boxes: Object.values(RUNS).map(box) }
      const page = nowFragment({ status: status as never, stats }).text
      const row = (runId: string) => page.split("<tr>").find((r) => r.includes(runId)) ?? ""
      expect(row(RUNS.fine)).toContain("<td>1.5 %</td><td>32.0 MiB</td>")
      expect(row(RUNS.stopping)).toContain("<td>—</td><td>8.0 MiB</td>")
      expect(row(RUNS.odd)).toMatch(/stats not read: .*could not be read/)
    }).pipe(Effect.provide(testEngine({ ...paths, home }, docker)), Effect.provide(Paths.layerAt({ ...paths, home })))
  })
})
