// A run stopped while the engine makes its box (a Ctrl-C at a run's start): the engine makes the container
// whether or not its caller still waits, so the box's close must remove what it made once the engine answers;
// it once removed by name before the container existed, and a "created" box was
// left for good (found by the approvals test's Ctrl-C, under gVisor's slower create).
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, type Layer, Schema } from "effect"
import { BoxBackend } from "../../src/backend/BoxBackend.js"
import type { BoxPlan } from "../../src/backend/plan.js"
import { OrgSchema } from "../../src/config/schema.js"
import * as C from "../../src/contract/constants.js"
import { type ContainerSpec, Docker, DockerError } from "../../src/docker/Docker.js"
import { DockerFake, makeDockerTest } from "../../src/docker/DockerTest.js"
import { tempPaths, testEngine, writeFixture } from "../support/harness.js"

const RUN = "2026-12-07-13-00-00-0000c0de"

const planFor = (deployment: string): BoxPlan => ({
  runId: RUN, worker: "alice", kind: "box", taskId: null, image: "roster-box:1", runtime: "runc", policy: Schema.decodeSync(OrgSchema)({}).box,
  user: { uid: 1000, gid: 1000 }, network: "roster-locked", gatewayAddress: "172.30.0.1", gatewayPort: 7300, token: "a".repeat(64),
  dirs: { pihome: "/h", inbox: "/in", store: "/s", selfView: "/sv", workerConfig: "/wc", workerRuns: "/wr", hiddenRuns: [], emptyDir: "/tmp/roster-empty", journal: "/j.jsonl", tasksView: "/t.json", ca: "/ca", caBundle: "/cab" },
  mounts: [], checkouts: [], channel: null, exposedEnv: [], anthropicEnvKey: false, ceilingMin: 30, deployment, deadline: 1, owner: { pid: 1, start: "1" }, hostCpus: 2,
  engine: { kind: "baked" }, mode: "json", piArgs: [], chatSend: null, termSend: false
})

/** The fake engine with its creates held until `release`, and (when `refuse`) answering them with a failure. */
const heldCreates = (release: Deferred.Deferred<void>, created: Deferred.Deferred<void>, refuse = false) => {
  const paths = tempPaths()
  writeFixture({ paths, workers: ["alice"] })
  const engine = makeDockerTest({
    script: () => ({ hang: true }),
    // Only this deployment's creates are held (and refused): a test makes another's container at once.
    before: (op, arg) =>
      op !== "containerCreate" || (arg as ContainerSpec).Labels[C.LABEL_DEPLOYMENT] !== paths.config ? Effect.void : Deferred.succeed(created, undefined).pipe(
        Effect.zipRight(Deferred.await(release)),
        Effect.zipRight(refuse ? Effect.fail(new DockerError({ operation: "create", detail: "Conflict: the name is in use", statusCode: 409 })) : Effect.void),
        Effect.orDie
      )
  })
  return { paths, layer: testEngine(paths, engine) as Layer.Layer<BoxBackend | Docker | DockerFake> }
}

describe("a box's open cut during the engine's create (the Docker fake)", () => {
  it.effect("the close removes the container the create made once the engine answers: none is left", () => {
    const setup = Effect.all([Deferred.make<void>(), Deferred.make<void>()])
    return Effect.flatMap(setup, ([release, created]) => {
      const { layer, paths } = heldCreates(release, created)
      return Effect.gen(function*() {
        const backend = yield* BoxBackend
        const opening = yield* Effect.fork(Effect.scoped(backend.open(planFor(paths.config))))
        yield* Deferred.await(created)
        // Stopped while the engine makes it; the engine answers after the stop.
        const stopped = yield* Effect.fork(Fiber.interrupt(opening))
        // The stop goes as far as it can before the engine answers (a close that does not wait is over by then).
        yield* Effect.repeatN(Effect.yieldNow(), 50)
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(stopped)
        // And the engine has carried out the create by now, whoever waited for it.
        yield* Effect.repeatN(Effect.yieldNow(), 50)
        const fake = yield* DockerFake
        const made = [...fake.containers.values()]
        expect(made.length).toBe(1)
        expect(made[0]?.state).toBe("removed")
      }).pipe(Effect.provide(layer))
    })
  })

  it.effect("a create the engine refused made nothing: the close removes no container, not another's of the same name", () => {
    const setup = Effect.all([Deferred.make<void>(), Deferred.make<void>()])
    return Effect.flatMap(setup, ([release, created]) => {
      const { layer, paths } = heldCreates(release, created, true)
      return Effect.gen(function*() {
        const docker = yield* Docker
        const fake = yield* DockerFake
        const backend = yield* BoxBackend
        // Another deployment's container under the name the run's box would have.
        const other = yield* docker.containerCreate({
          name: `roster-box-${RUN}`, Labels: { [C.LABEL_DEPLOYMENT]: "/another/config" }, HostConfig: { AutoRemove: false }
        } as unknown as ContainerSpec)
        yield* docker.containerStart(other)
        yield* Deferred.succeed(release, undefined)
        const opened = yield* Effect.exit(Effect.scoped(backend.open(planFor(paths.config))))
        expect(opened._tag).toBe("Failure")
        expect(yield* Deferred.isDone(created)).toBe(true)
        expect(yield* fake.callsOf("containerRemove")).toEqual([])
        expect(yield* fake.callsOf("containerKill")).toEqual([])
        expect(fake.containers.get(other)?.state).toBe("running")
      }).pipe(Effect.provide(layer))
    })
  })
})
