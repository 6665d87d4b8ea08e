import { ConfigProvider, Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { Firewall } from "../../src/box/Firewall.js"
import { Paths } from "../../src/config/Paths.js"
import { GatewayProbe } from "../../src/contract/GatewayProbe.js"
import { DockerFake, makeDockerTest } from "../../src/docker/DockerTest.js"
import { RosterLive } from "../../src/RosterLive.js"
import { runOnce } from "../../src/box/runOnce.js"
import { Reporter } from "../../src/report/Reporter.js"
import { tempPaths, writeFixture } from "../support/harness.js"

const answer = JSON.stringify({ type: "message_end", message: { role: "assistant", content: [{ type: "text", text: "hi" }], stopReason: "stop" } })

describe("embedding over RosterLive", () => {
  it("an engine and a deployment provided over RosterLive are the ones every service uses (images and records included)", async () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const mine = Layer.mergeAll(
      makeDockerTest({ script: () => ({ stdout: [`${answer}\n`], exitCode: 0 }) }),
      Paths.layerAt(paths),
      GatewayProbe.layerTest(() => ({ ok: true, config_root: paths.config, version: "test" })),
      Firewall.layerTest(),
      Reporter.layerCollect,
      Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["ANTHROPIC_API_KEY", "sk-ant-embed-test"]])))
    )
    const seen = await Effect.runPromise(Effect.gen(function*() {
      const outcome = yield* runOnce({ worker: "alice", prompt: "hello", ceilingMin: 1 })
      const fake = yield* DockerFake
      return {
        outcome,
        imageInspects: yield* fake.callsOf("imageInspect"),
        creates: (yield* fake.callsOf("containerCreate")).length
      }
    }).pipe(Effect.provide(mine), Effect.provide(RosterLive)))
    // The image was inspected on the fake engine, not on a live one (ImageStore reads Docker per call).
    expect(seen.imageInspects).toEqual(["roster-box:1"])
    expect(seen.creates).toBe(1)
    expect(seen.outcome).toMatchObject({ endedBy: "exit", exitCode: 0, finalText: "hi" })
    // The run record is in the provided deployment (RunLog reads Paths per call).
    expect(fs.existsSync(path.join(paths.data, "runs", "alice", seen.outcome.runId, "run.json"))).toBe(true)
  })
})
