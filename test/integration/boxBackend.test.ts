import { Chunk, Effect, Fiber, Layer, Stream } from "effect"
import Dockerode from "dockerode"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { BoxBackend } from "../../src/backend/BoxBackend.js"
import type { BoxPlan, BoxRuntime } from "../../src/backend/plan.js"
import { hostUser } from "../../src/box/provision.js"
import { OrgConfig } from "../../src/config/OrgConfig.js"
import { Paths } from "../../src/config/Paths.js"
import { lockdownNetworkName } from "../../src/contract/deployment.js"
import { currentOwner } from "../../src/contract/owner.js"
import { makeRosterLive } from "../../src/RosterLive.js"
import { type Deployment, makeDeployment, TEST_IMAGE } from "../support/deployment.js"

const docker = new Dockerode()

/** A plan for a box of the scripted engine that prints a line, then waits to be killed (its folders in a temp tree). */
const planOf = (d: Deployment, iso: { readonly network: string; readonly gatewayAddress: string; readonly gatewayPort: number }, runId: string, runtime: BoxRuntime) =>
  Effect.gen(function*() {
    const org = yield* (yield* OrgConfig).snapshot
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "roster-backend-"))
    const dir = (name: string) => {
      fs.mkdirSync(path.join(root, name), { recursive: true, mode: 0o777 })
      return path.join(root, name)
    }
    // The self view holds its own mountpoints, as a run's does (the engine writes nothing into the worker's config).
    for (const sub of ["self/config", "self/journal", "self/runs", "pihome/workspace", "pihome/session", "pihome/agent"]) dir(sub)
    fs.writeFileSync(path.join(root, "self", "schedule.json"), "{}\n")
    const file = (name: string) => {
      fs.writeFileSync(path.join(root, name), "")
      return path.join(root, name)
    }
    const plan: BoxPlan = {
      runId, worker: "alice", kind: "box", taskId: null, image: TEST_IMAGE, runtime, policy: org.box,
      user: hostUser(), network: iso.network, gatewayAddress: iso.gatewayAddress, gatewayPort: iso.gatewayPort,
      token: "0".repeat(64),
      dirs: {
        pihome: dir("pihome"), inbox: dir("inbox"), store: dir("store"), selfView: dir("self"), workerConfig: dir("config"), workerRuns: dir("runs"), hiddenRuns: [], emptyDir: "/tmp/roster-empty",
        journal: undefined, tasksView: file("schedule.json"), ca: d.file("state", "ca", "ca.crt"), caBundle: d.file("state", "ca", "ca.crt")
      },
      mounts: [], checkouts: [], channel: null, exposedEnv: [], anthropicEnvKey: false, ceilingMin: 1,
      deployment: d.file("config"), deadline: Date.now() + 60_000, owner: yield* currentOwner, hostCpus: os.availableParallelism(),
      engine: { kind: "baked" }, mode: "json",
      piArgs: ["--session-id", "contract", "--append-system-prompt", "", "!echo backend-contract-hello; sleep 120"],
      chatSend: null, termSend: false
    }
    return plan
  })

describe("the Docker box backend, against its contract (a real engine, a real daemon's gateway)", () => {
  let d: Deployment

  beforeAll(async () => {
    d = await makeDeployment()
  })
  afterAll(async () => {
    await d?.stop()
  })

  it("isolation, open, list, stats and kill, each ending clean: the box says its first line, is listed by run and deployment, is measured, is gone once killed and its scope closed", async () => {
    const paths = Paths.fromEnv({ ROSTER_HOME: d.home, HOME: path.join(d.home, "user") })
    const live = makeRosterLive({ paths: Paths.layerAt({ ...paths, home: path.join(d.home, "user") }) })
    const runId = `2026-12-05-00-00-00-${Math.floor(Math.random() * 0xffffffff).toString(16).padStart(8, "0")}`
    const program = Effect.gen(function*() {
      const backend = yield* BoxBackend
      yield* backend.ping
      const org = yield* (yield* OrgConfig).snapshot
      // Isolation: the deployment's locked network, the gateway on its bridge.
      const iso = yield* backend.isolation(org.box)
      expect(iso.network).toBe(lockdownNetworkName(d.file("config")))
      expect(iso.gatewayPort).toBe(d.port)
      expect(iso.gatewayAddress).toMatch(/^\d+\.\d+\.\d+\.\d+$/)
      const net = yield* Effect.promise(() => docker.getNetwork(iso.network).inspect() as Promise<{ Internal: boolean }>)
      expect(net.Internal).toBe(true)
      expect(yield* backend.runtime({ runtime: "runc" })).toBe("runc")
      // The default: gVisor where the engine has it registered (CI registers it), and the box opened under it.
      const runtime = yield* backend.runtime({ runtime: "auto" })
      expect(runtime).toBe("runsc")

      const plan = yield* planOf(d, iso, runId, runtime)
      const opened = yield* Effect.scoped(Effect.gen(function*() {
        const box = yield* backend.open(plan)
        expect(box.name).toBe(`roster-box-${runId}`)
        // Made, not started: its output is read from the first byte.
        const said = yield* box.stdout.pipe(Stream.decodeText(), Stream.splitLines, Stream.filter((l) => l.includes("backend-contract-hello")), Stream.take(1), Stream.runCollect, Effect.fork)
        yield* box.start
        expect(Chunk.toReadonlyArray(yield* Fiber.join(said).pipe(Effect.timeout("20 seconds")))).toEqual(["backend-contract-hello"])
        // Listed, in roster's words, by deployment and by run.
        const mine = (yield* backend.list()).filter((b) => b.runId === runId)
        expect(mine).toEqual([expect.objectContaining({ id: box.id, name: box.name, worker: "alice", kind: "box", taskId: null, named: true, deadline: plan.deadline })])
        expect((yield* backend.list({ runId })).map((b) => b.id)).toEqual([box.id])
        // Measured.
        const stats = yield* backend.stats(box.id)
        expect(stats?.memoryBytes ?? 0).toBeGreaterThan(0)
        // Killed: its exit comes, and killing again is no error.
        expect(yield* backend.kill(box.id)).toBe(true)
        yield* box.exited.pipe(Effect.timeout("20 seconds"))
        expect(yield* backend.kill(box.id)).toBe(false)
        return box.id
      }))
      // The scope closed: nothing of the box is left, and a stats of it is none.
      expect((yield* backend.list({ runId, ended: true })).length).toBe(0)
      expect(yield* backend.stats(opened).pipe(Effect.orElseSucceed(() => undefined))).toBeUndefined()
      return opened
    })
    const id = await Effect.runPromise(program.pipe(Effect.provide(Layer.fresh(live))))
    const left = await docker.listContainers({ all: true, filters: { id: [id] } })
    expect(left).toEqual([])
  })
})
