// How soon a run's pi asks its model: from `roster worker run` starting to the box's first model
// request arriving at the model (the rehearsal model, a local stand-in for Claude, behind the
// gateway's route), with a warm box against a cold start of the same run, alternating. Real pi
// in the real box image; needs the Docker engine (scripts/ensure-host.sh) and builds that image.
import { Effect, Exit, Scope } from "effect"
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, it } from "vitest"
import { type Received, serveRehearsal } from "../src/rehearsal/server.js"
import { freePort } from "../test/support/deployment.js"
import { buildPiImage, PI_IMAGE } from "../test/support/images.js"
import { boxMemoryMiB, emit, percentile, quick, settledWarmBox, smoke, warmBoxes } from "./support.js"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const bin = path.join(root, "bin/roster.js")
const RUNS = smoke ? 1 : quick ? 3 : 7

describe("a run's first model request", () => {
  let env: NodeJS.ProcessEnv
  let home = ""
  let orgToml = ""
  let scope: Scope.CloseableScope
  let received: Array<Received> = []

  const useRuntime = (runtime: "runc" | "runsc", warm: "off" | "recent") =>
    fs.writeFileSync(path.join(home, "config", "org.toml"), `${orgToml}[box]\nruntime = "${runtime}"\nwarm = "${warm}"\n`)
  /** One `worker run`: the ms from its start to its first model request at the model. */
  const firstRequest = async () => {
    const t0 = Date.now()
    const child = spawn(bin, ["worker", "run", "alice", "Say hello."], { env, stdio: ["ignore", "ignore", "pipe"] })
    let stderr = ""
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()))
    const code = await new Promise<number | null>((r) => child.once("exit", r))
    if (code !== 0) throw new Error(`worker run exited ${code}: ${stderr}`)
    const first = received.find((r) => r.at >= t0 && r.path.startsWith("/v1/messages"))
    if (!first) throw new Error("the run made no model request")
    return first.at - t0
  }

  beforeAll(async () => {
    home = fs.mkdtempSync(path.join(os.tmpdir(), "roster-bench-first-"))
    env = { ...process.env, ROSTER_HOME: home, HOME: home, ANTHROPIC_API_KEY: "sk-ant-bench-not-real" }
    buildPiImage()
    scope = Effect.runSync(Scope.make())
    const model = await Effect.runPromise(serveRehearsal({ port: 0 }).pipe(Scope.extend(scope)))
    received = model.received
    spawnSync(bin, ["init"], { env })
    orgToml = [
      "[engine]", `image = "${PI_IMAGE}"`,
      "[gateway]", `port = ${await freePort()}`,
      "[[grant]]", `name = "anthropic"`, `hosts = ["api.anthropic.com"]`, `scope = ["org/*"]`, `credential = "anthropic"`,
      "[[route]]", `host = "api.anthropic.com"`, `upstream = "http://127.0.0.1:${model.port}"`
    ].join("\n") + "\n"
    useRuntime("runc", "off")
    const started = spawnSync(bin, ["server", "start"], { env, encoding: "utf8" })
    if (started.status !== 0) throw new Error(`the daemon did not start: ${started.stderr}`)
  }, 900_000)

  afterAll(async () => {
    if (home) spawnSync(bin, ["server", "stop"], { env })
    if (scope) await Effect.runPromise(Scope.close(scope, Exit.void))
  })

  /** Cold and warm runs under `runtime`, alternating (org.toml switched between them, so each warm box is made after its switch). */
  const compare = async (runtime: "runc" | "runsc") => {
    const cold: Array<number> = []
    const warm: Array<number> = []
    const memory: Array<number> = []
    for (let i = 0; i < RUNS; i++) {
      useRuntime(runtime, "off")
      cold.push(await firstRequest())
      useRuntime(runtime, "recent")
      // The run after a switch starts its own box (the warm one, if any, was made from other settings) and leaves one.
      await firstRequest()
      await settledWarmBox(home, "alice")
      // What the settled box holds while it waits (pi loaded, no prompt yet): what [box] warm_max multiplies.
      memory.push(boxMemoryMiB(warmBoxes(path.join(home, "config"))[0]?.id ?? ""))
      warm.push(await firstRequest())
    }
    const w = percentile(warm, 50)
    const c = percentile(cold, 50)
    const label = runtime === "runc" ? "" : " under gVisor"
    emit({
      metric: `worker run to its first model request${label}, warm box, p50 (real pi)`, roster: w, baseline: c, unit: "ms", compare: "ratio",
      goal: "<= 150 ms", pass: w <= 150, spread: `min ${Math.min(...warm).toFixed(0)} max ${Math.max(...warm).toFixed(0)}, n=${RUNS}; baseline: the same run cold`
    })
    const m = percentile(memory, 50)
    emit({
      metric: `memory one warm box holds while it waits${label} (real pi, engine stats)`, roster: m, baseline: m, unit: "MB", compare: "absolute",
      goal: "reported (warm_max multiplies it)", pass: Number.isFinite(m),
      spread: `min ${Math.min(...memory).toFixed(0)} max ${Math.max(...memory).toFixed(0)}, n=${RUNS}`
    })
  }

  it("worker run to its first model request, warm box against cold (real pi, the rehearsal model)", async () => {
    await compare("runc")
    if (!smoke) await compare("runsc")
  }, 900_000)
})
