import { Effect, Exit, Scope } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { serveRehearsal } from "../../src/rehearsal/server.js"
import { collect, type Deployment, makeDeployment, ROSTER_BIN } from "../support/deployment.js"
import { runBoxesOf } from "../support/leftovers.js"
import { type Postgres, startPostgres } from "../support/postgres.js"

const PI_IMAGE = "roster-box:test"

describe("a fleet's budget holds across nodes: real pi on two daemons, one Postgres, the rehearsal model", () => {
  let pg: Postgres
  let scope: Scope.CloseableScope
  const shared = fs.mkdtempSync(path.join(os.tmpdir(), "roster-shared-"))
  const nodes: Array<Deployment> = []

  beforeAll(async () => {
    pg = await startPostgres()
    scope = Effect.runSync(Scope.make())
    const model = await Effect.runPromise(serveRehearsal({ port: 0 }).pipe(Scope.extend(scope)))
    const org = [
      `[cluster]`, `database = "${pg.url}"`, `shared_data = "${shared}"`,
      "[[grant]]", `name = "anthropic"`, `hosts = ["api.anthropic.com"]`, `scope = ["org/*"]`, `credential = "anthropic"`,
      "[[route]]", `host = "api.anthropic.com"`, `upstream = "http://127.0.0.1:${model.port}"`
    ].join("\n")
    for (const name of ["spend-a", "spend-b"]) {
      const d = await makeDeployment(org, PI_IMAGE, undefined, { env: { ROSTER_NODE: name, PGPASSWORD: pg.password }, start: false })
      nodes.push(d)
      const key = await collect(spawn(ROSTER_BIN, ["connection", "add", "anthropic", "--from-env", "K"], { env: { ...d.env, K: "sk-ant-fleet-test-key" }, stdio: ["ignore", "pipe", "pipe"] }))
      expect(key.code, key.stderr).toBe(0)
      expect((await d.roster(["worker", "add", "bea"])).code).toBe(0)
      fs.writeFileSync(d.file("config", "workers", "bea", "worker.toml"), `model = "anthropic/claude-sonnet-4-5"\n`)
      const started = await d.roster(["server", "start"])
      expect(started.code, started.stdout + started.stderr).toBe(0)
    }
  })

  afterAll(async () => {
    for (const d of nodes) await d.stop().catch(() => undefined)
    await Effect.runPromise(Scope.close(scope, Exit.void))
    pg?.remove()
    fs.rmSync(shared, { recursive: true, force: true })
  })

  const recordOf = (stdout: string) => {
    const id = /box (\S+) ended by/.exec(stdout)?.[1] ?? ""
    return JSON.parse(fs.readFileSync(path.join(shared, "runs", "bea", id, "run.json"), "utf8")) as {
      ended_by: string
      error: string | null
      usage?: { usd: number; answers: number }
    }
  }

  it("a worker's daily budget spent by a run on one node stops the run that crosses it on the other, mid-stream", async () => {
    const [a, b] = nodes as [Deployment, Deployment]
    const first = await a.roster(["worker", "run", "bea", "What system is your box running?"])
    expect(first.code, first.stderr).toBe(0)
    const spentOnA = recordOf(first.stdout).usage?.usd ?? 0
    expect(spentOnA).toBeGreaterThan(0)
    // A day's budget a little over what node a spent: b's first answer, a fraction of a whole run, crosses it
    // only counted with a's — a node counting its own spending alone would let the run finish.
    const budget = `model = "anthropic/claude-sonnet-4-5"\n[budget]\nworker_daily_usd = ${(spentOnA * 1.2).toFixed(8)}\n`
    for (const d of nodes) fs.writeFileSync(d.file("config", "workers", "bea", "worker.toml"), budget)
    const second = await b.roster(["worker", "run", "bea", "What system is your box running?"])
    expect(second.code, second.stdout + second.stderr).toBe(3)
    expect(second.stdout).toContain("ended by budget")
    const stopped = recordOf(second.stdout)
    expect(stopped.ended_by).toBe("budget")
    expect(stopped.error).toContain("out of budget: worker_daily_usd")
    // Cut while its first answer streamed: one answer in the fleet's ledger, costing less than node a's whole run
    // (a node counting only its own spending lets this run go on answer after answer).
    const runB = /box (\S+) ended by/.exec(second.stdout)?.[1] ?? ""
    expect(pg.sql(`SELECT count(*) || ' ' || min(node) FROM roster_spend WHERE run_id = '${runB}'`)).toBe("1 spend-b")
    expect(stopped.usage?.answers).toBe(1)
    expect(stopped.usage!.usd).toBeLessThan(spentOnA)
    // Either node's `roster usage` shows both runs.
    const usage = JSON.parse((await a.roster(["usage", "--worker", "bea", "--json"])).stdout) as { workers: Record<string, { runs: number; usd: number }> }
    expect(usage.workers.bea?.runs).toBe(2)
    expect(usage.workers.bea?.usd).toBeCloseTo(spentOnA + stopped.usage!.usd, 6)
    // No box of the stopped run is left (a warm box waiting for bea's next run is not one).
    expect(await runBoxesOf(b.file("config"))).toEqual([])
  })
})
