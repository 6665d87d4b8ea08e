import { Effect, Exit, Scope } from "effect"
import Dockerode from "dockerode"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { REHEARSAL_MESSAGE } from "../../src/rehearsal/script.js"
import { type Received, serveRehearsal } from "../../src/rehearsal/server.js"
import { type Deployment, makeDeployment } from "../support/deployment.js"
import { latestRunId } from "../support/runs.js"

const PI_IMAGE = "roster-box:test"
const docker = new Dockerode()

/** What a transcript says, event by event, without what only rpc mode prints (its answers to commands). */
const shape = (runDir: string) =>
  fs.readFileSync(path.join(runDir, "stdout.jsonl"), "utf8").split("\n").filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as { type: string; message?: { role?: string } })
    .filter((e) => e.type !== "response" && e.type !== "session" && !e.type.startsWith("roster_"))
    .map((e) => (e.message?.role ? `${e.type}:${e.message.role}` : e.type))

describe("a warm box with real pi in the real box image, through the real gateway, against the rehearsal model", () => {
  let d: Deployment
  let scope: Scope.CloseableScope
  let model: { port: number; received: Array<Received> }

  beforeAll(async () => {
    scope = Effect.runSync(Scope.make())
    model = await Effect.runPromise(serveRehearsal({ port: 0 }).pipe(Scope.extend(scope)))
    d = await makeDeployment([
      "[box]", `warm = "recent"`,
      "[[grant]]", `name = "anthropic"`, `hosts = ["api.anthropic.com"]`, `scope = ["org/*"]`, `credential = "anthropic"`,
      "[[route]]", `host = "api.anthropic.com"`, `upstream = "http://127.0.0.1:${model.port}"`
    ].join("\n"), PI_IMAGE)
    fs.writeFileSync(d.file("config", "workers", "alice", "worker.toml"), `model = "anthropic/claude-sonnet-4-5"\n`)
  })

  afterAll(async () => {
    await d?.stop()
    await Effect.runPromise(Scope.close(scope, Exit.void))
  })

  it("a warm run and a cold run of the same prompt: the same transcript shape, messages, answer and record fields (warm: true|false)", async () => {
    const runs = d.file("data", "runs", "alice")
    const prompt = "What system is your box running?"
    const cold = await d.roster(["worker", "run", "alice", prompt])
    expect(cold.code, cold.stderr).toBe(0)
    const coldId = latestRunId(runs)
    // pi waits in rpc mode for a prompt in the warm box the daemon makes next.
    const deadline = Date.now() + 60_000
    let warmId = ""
    while (warmId === "" && Date.now() < deadline) {
      const [c] = await docker.listContainers({ filters: { label: [`roster.deployment=${d.file("config")}`, "roster.kind=warm"] } })
      warmId = c?.Labels["roster.run-id"] ?? ""
      if (warmId === "") await new Promise((r) => setTimeout(r, 200))
    }
    expect(warmId).not.toBe("")
    const callsBefore = model.received.length
    const warm = await d.roster(["worker", "run", "alice", prompt])
    expect(warm.code, warm.stderr).toBe(0)
    expect(latestRunId(runs)).toBe(warmId)
    const [c, w] = [coldId, warmId].map((id) => JSON.parse(fs.readFileSync(path.join(runs, id, "run.json"), "utf8")))
    expect(c).toMatchObject({ warm: false, ended_by: "exit", exit_code: 0, error: null, stop_reason: "stop", messages: [REHEARSAL_MESSAGE] })
    expect(w).toMatchObject({ warm: true, ended_by: "exit", exit_code: 0, error: null, stop_reason: "stop", messages: [REHEARSAL_MESSAGE], preflight: { ok: true } })
    // The same words, but for the run's id and the box's own hostname (its container's id).
    const same = (s: string, runId: string) => s.replaceAll(runId, "RUN").replace(/host=[0-9a-f]{12}/g, "host=BOX")
    expect(same(w.final_text, warmId)).toBe(same(c.final_text, coldId))
    expect(shape(path.join(runs, warmId))).toEqual(shape(path.join(runs, coldId)))
    expect(same(warm.stdout, warmId)).toBe(same(cold.stdout, coldId))
    // The warm box's model calls went out under the run, after its claim: none while it waited.
    expect(model.received.length).toBeGreaterThan(callsBefore)
  })
})
