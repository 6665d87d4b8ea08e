import { ConfigProvider, Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { Firewall } from "../../src/box/Firewall.js"
import { Paths } from "../../src/config/Paths.js"
import { GatewayProbe } from "../../src/contract/GatewayProbe.js"
import { DockerFake, makeDockerTest } from "../../src/docker/DockerTest.js"
import { makeRosterLive } from "../../src/RosterLive.js"
import { RunLog } from "../../src/run/RunLog.js"
import { runOnce } from "../../src/box/runOnce.js"
import { Reporter } from "../../src/report/Reporter.js"
import { tempPaths, writeFixture } from "../support/harness.js"

const answer = JSON.stringify({ type: "message_end", message: { role: "assistant", content: [{ type: "text", text: "hi" }], stopReason: "stop" } })

const parts = (paths: ReturnType<typeof tempPaths>) => ({
  docker: makeDockerTest({ script: () => ({ stdout: [`${answer}\n`], exitCode: 0 }) }),
  paths: Paths.layerAt(paths),
  probe: GatewayProbe.layerTest(() => ({ ok: true, config_root: paths.config, version: "test" })),
  firewall: Firewall.layerTest(),
  reporter: Reporter.layerCollect
})

const modelKey = Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["ANTHROPIC_API_KEY", "sk-ant-embed-test"]])))

describe("embedding over makeRosterLive", () => {
  it("an engine and a deployment given to makeRosterLive are the ones every service uses (images and records included)", async () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const seen = await Effect.runPromise(Effect.gen(function*() {
      const outcome = yield* runOnce({ worker: "alice", prompt: "hello", ceilingMin: 1 })
      const fake = yield* DockerFake
      return {
        outcome,
        imageInspects: yield* fake.callsOf("imageInspect"),
        creates: (yield* fake.callsOf("containerCreate")).length
      }
    }).pipe(Effect.provide(Layer.merge(makeRosterLive(parts(paths)), modelKey))))
    // The image was inspected on the fake engine, not on a live one (ImageStore captured the given engine).
    expect(seen.imageInspects).toEqual(["roster-box:1"])
    expect(seen.creates).toBe(1)
    expect(seen.outcome).toMatchObject({ endedBy: "exit", exitCode: 0, finalText: "hi" })
    // The run record is in the provided deployment (RunLog captured the given Paths).
    expect(fs.existsSync(path.join(paths.data, "runs", "alice", seen.outcome.runId, "run.json"))).toBe(true)
  })
  it("one service swapped by one part is the one every run uses (a run log that records what it was asked)", async () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const started: Array<string> = []
    // The live run log, wrapped: a stand-in for another store (a database) in the same place.
    const runLog = Layer.effect(RunLog, Effect.map(RunLog, (live) => ({
      ...live,
      start: (run: Parameters<typeof live.start>[0]) => Effect.sync(() => started.push(run.runId)).pipe(Effect.zipRight(live.start(run)))
    }))).pipe(Layer.provide(RunLog.layer))
    const outcome = await Effect.runPromise(
      runOnce({ worker: "alice", prompt: "hello", ceilingMin: 1 }).pipe(Effect.provide(Layer.merge(makeRosterLive({ ...parts(paths), runLog }), modelKey)))
    )
    expect(started).toEqual([outcome.runId])
    expect(fs.existsSync(path.join(paths.data, "runs", "alice", outcome.runId, "run.json"))).toBe(true)
  })
})
