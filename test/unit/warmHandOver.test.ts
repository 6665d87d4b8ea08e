import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Ref, Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { BoxBackend } from "../../src/backend/BoxBackend.js"
import type { PreparedRun } from "../../src/box/prepareRun.js"
import type { WarmBox } from "../../src/box/warmBox.js"
import { handOverWarm } from "../../src/box/warmHandOver.js"
import { WarmBoxUnready } from "../../src/box/warmReady.js"
import { layout } from "../../src/config/Paths.js"
import * as C from "../../src/contract/constants.js"
import { type ContainerSpec, Docker } from "../../src/docker/Docker.js"
import { DockerFake, makeDockerTest } from "../../src/docker/DockerTest.js"
import { tempPaths, testEngine } from "../support/harness.js"

const MADE_AS = "2026-12-06-21-00-00-0000aaaa"
const RUN = "2026-12-06-21-20-00-0000bbbb"

/** The engine's boxes keep running (a warm box waits for its prompt). */
const engine = (paths: ReturnType<typeof tempPaths>) => testEngine(paths, makeDockerTest({ script: () => ({ hang: true }) }))

/** A warm box of alice as the hand-over sees it: a running container named for its own run id, and its folder. */
const warmOf = (paths: ReturnType<typeof tempPaths>, preflightIn: WarmBox["preflightIn"]) =>
  Effect.gen(function*() {
    const docker = yield* Docker
    const id = yield* docker.containerCreate({
      name: `roster-box-${MADE_AS}`,
      Labels: { [C.LABEL_RUN_ID]: MADE_AS, [C.LABEL_WORKER]: "alice", [C.LABEL_KIND]: "warm", [C.LABEL_DEPLOYMENT]: paths.config },
      HostConfig: { AutoRemove: false }
    } as unknown as ContainerSpec)
    yield* docker.containerStart(id)
    const runDir = layout(paths).runDir("alice", MADE_AS)
    fs.mkdirSync(path.join(runDir, "home", "session"), { recursive: true })
    fs.writeFileSync(path.join(runDir, "events.jsonl"), `{"kind":"preflight","result":{"ok":true}}\n`)
    const warm = {
      runId: MADE_AS,
      worker: "alice",
      box: { id },
      goesBy: yield* Ref.make(MADE_AS),
      scope: yield* Scope.make(),
      preflightIn,
      plan: {
        runId: MADE_AS,
        checkouts: [],
        dirs: { pihome: path.join(runDir, "home"), inbox: path.join(runDir, "inbox"), selfView: path.join(runDir, "self"), store: "/elsewhere/store" }
      }
    } as unknown as WarmBox
    return { warm, id, runDir }
  })

describe("a warm box handed to the run that takes it (the Docker fake, a temp deployment)", () => {
  it.effect("goes by the run's id: the box renamed (every look finds it under the run's id, none under its own), its folder moved, its plan pointing there", () => {
    const paths = tempPaths()
    return Effect.gen(function*() {
      const { id, runDir, warm } = yield* warmOf(paths, Effect.void)
      const taken = yield* handOverWarm(warm, { runId: RUN } as PreparedRun)
      yield* taken.renamed
      expect(taken).toMatchObject({ runId: RUN, madeAs: MADE_AS, plan: { runId: RUN } })
      const moved = layout(paths).runDir("alice", RUN)
      expect(taken.plan.dirs).toMatchObject({ pihome: path.join(moved, "home"), inbox: path.join(moved, "inbox"), selfView: path.join(moved, "self"), store: "/elsewhere/store" })
      expect(fs.existsSync(runDir)).toBe(false)
      expect(fs.readFileSync(path.join(moved, "events.jsonl"), "utf8")).toContain("preflight")
      expect(yield* Ref.get(warm.goesBy)).toBe(RUN)
      const backend = yield* BoxBackend
      expect((yield* backend.list({ runId: RUN })).map((b) => b.id)).toEqual([id])
      expect(yield* backend.list({ runId: MADE_AS })).toEqual([])
      // Its label still says what it was made as (labels cannot change); its run is read from its name.
      expect((yield* backend.list()).map((b) => ({ id: b.id, runId: b.runId, name: b.name }))).toEqual([{ id, runId: RUN, name: `roster-box-${RUN}` }])
      expect(yield* backend.killRun(RUN)).toBe(1)
    }).pipe(Effect.provide(engine(paths)))
  })

  it.effect("is not handed over while its preflight is not in, passed: no rename asked of the engine, its folder where it was", () => {
    const paths = tempPaths()
    return Effect.gen(function*() {
      const { runDir, warm } = yield* warmOf(paths, Effect.fail(new WarmBoxUnready({ worker: "alice", why: "the gateway recorded its preflight as failed" })))
      const exit = yield* Effect.exit(handOverWarm(warm, { runId: RUN } as PreparedRun))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(yield* (yield* DockerFake).callsOf("containerRename")).toEqual([])
      expect(fs.existsSync(runDir)).toBe(true)
      expect(yield* Ref.get(warm.goesBy)).toBe(MADE_AS)
    }).pipe(Effect.provide(engine(paths)))
  })
})
