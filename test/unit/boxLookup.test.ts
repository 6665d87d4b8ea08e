import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { BoxBackend } from "../../src/backend/BoxBackend.js"
import * as C from "../../src/contract/constants.js"
import { type ContainerSpec, Docker } from "../../src/docker/Docker.js"
import { DockerFake, makeDockerTest } from "../../src/docker/DockerTest.js"
import { LiveRuns } from "../../src/gateway/base/LiveRuns.js"
import { cancelInPlace } from "../../src/supervisor/queueTask.js"
import { TaskStore } from "../../src/task/TaskStore.js"
import { Layer } from "effect"
import { tempPaths, testEngine, writeFixture } from "../support/harness.js"

const RUN = "2026-12-07-09-00-00-0000f0e1"

describe("a run's box is looked up by its name and its deployment's label (the Docker fake)", () => {
  it.effect("a container of another deployment named like this deployment's run is not its box: not live to the gateway, not killed by a cancel or killRun", () => {
    const paths = tempPaths()
    writeFixture({ paths, workers: ["alice"] })
    const layer = Layer.mergeAll(TaskStore.layer, LiveRuns.layer).pipe(
      Layer.provideMerge(testEngine(paths, makeDockerTest({ script: () => ({ hang: true }) })))
    )
    return Effect.gen(function*() {
      const docker = yield* Docker
      const foreign = yield* docker.containerCreate({
        name: `roster-box-${RUN}`,
        Labels: { [C.LABEL_RUN_ID]: RUN, [C.LABEL_WORKER]: "alice", [C.LABEL_KIND]: "task", [C.LABEL_DEPLOYMENT]: "/another/deployment/config" },
        HostConfig: { AutoRemove: false }
      } as unknown as ContainerSpec)
      yield* docker.containerStart(foreign)
      const backend = yield* BoxBackend
      expect(yield* backend.list({ runId: RUN })).toEqual([])
      expect(yield* (yield* LiveRuns).isLive(RUN)).toBe(false)
      expect(yield* backend.killRun(RUN)).toBe(0)
      // A task of this deployment whose last run has that id, cancelled with the daemon down.
      const store = yield* TaskStore
      const t = yield* store.add({ worker: "alice", prompt: "x", ceilingMin: null, after: null, origin: { by: "person", run_id: null, task_id: null } })
      yield* store.update(t.task_id, (x) => ({ ...x, status: "running", run_ids: [RUN] }))
      const cancelled = yield* cancelInPlace((yield* store.get(t.task_id))!)
      expect(cancelled.status).toBe("cancelled")
      const fake = yield* DockerFake
      expect(yield* fake.callsOf("containerKill")).toEqual([])
      expect(fake.containers.get(foreign)?.state).toBe("running")
    }).pipe(Effect.provide(layer))
  })
})
