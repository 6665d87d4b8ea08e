import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { egressChainName } from "../../src/contract/deployment.js"
import { type Deployment, freePort, makeDeployment } from "../support/deployment.js"
import { removeLockdownRules } from "../support/lockdownRules.js"

const rulesPerTool = (chain: string) =>
  ["iptables", "ip6tables"].map((t) => {
    try {
      return execFileSync(t, ["-S", chain], { stdio: ["ignore", "pipe", "ignore"] }).toString().trim().split("\n").filter((l) => l.startsWith("-A"))
    } catch {
      return []
    }
  })
const chainRules = (chain: string) => rulesPerTool(chain).flat()


describe("one daemon per deployment (state/daemon.lock, real engine and iptables)", () => {
  let d: Deployment
  const lockdown = "[box]\negress_lockdown = true\n[supervisor]\nconcurrency = 1\n"

  beforeAll(async () => {
    d = await makeDeployment(lockdown)
  })
  afterAll(async () => {
    await d?.stop()
    if (d) removeLockdownRules(egressChainName(d.file("config")))
  })

  it("a second daemon on another port is refused before it touches anything: the live one keeps its state, chain, tasks and stop", async () => {
    const chain = egressChainName(d.file("config"))
    const stateFile = d.file("state", "gateway.json")
    const stateBefore = fs.readFileSync(stateFile, "utf8")
    const live = JSON.parse(stateBefore) as { pid: number; port: number }
    // `server start` has returned: the lockdown is whole in both families, not still going in.
    for (const rules of rulesPerTool(chain).filter((r) => r.length > 0)) expect(rules.at(-1)).toMatch(/-j DROP$/)
    const rulesBefore = chainRules(chain)
    expect(rulesBefore.length).toBeGreaterThan(0)
    const added = await d.roster(["task", "add", "alice", "!sleep 4; echo first-done"])
    const running = /task (t-[0-9a-f]{8}) queued/.exec(added.stdout)?.[1] ?? ""
    const queued = /task (t-[0-9a-f]{8}) queued/.exec((await d.roster(["task", "add", "alice", "!echo second-done"])).stdout)?.[1] ?? ""

    // The same deployment with another gateway port, started in the foreground as a unit would.
    const toml = d.file("config", "org.toml")
    const original = fs.readFileSync(toml, "utf8")
    fs.writeFileSync(toml, original.replace(`port = ${d.port}`, `port = ${await freePort()}`))
    try {
      const second = await d.roster(["server", "start", "--foreground"])
      expect(second.code).toBe(1)
      expect(second.stderr).toContain(`another roster daemon (pid ${live.pid})`)
      expect(second.stderr).toContain("roster server stop")
      // A detached start says the same without spawning anything.
      const detached = await d.roster(["server", "start"])
      expect(detached.code, detached.stderr).toBe(0)
      expect(detached.stdout).toContain(`already running (pid ${live.pid})`)
    } finally {
      fs.writeFileSync(toml, original)
    }
    expect(fs.readFileSync(stateFile, "utf8")).toBe(stateBefore)
    expect(chainRules(chain)).toEqual(rulesBefore)
    const status = JSON.parse((await d.roster(["server", "status", "--json"])).stdout) as { running: boolean; healthy: boolean; pid: number }
    expect(status).toMatchObject({ running: true, healthy: true, pid: live.pid })

    // The live daemon's queue goes on as if nothing happened: both tasks done, one after the other.
    const until = async (id: string) => {
      const deadline = Date.now() + 60_000
      for (;;) {
        const t = JSON.parse((await d.roster(["task", "show", id, "--json"])).stdout) as { status: string }
        if (["done", "failed", "cancelled"].includes(t.status) || Date.now() > deadline) return t
        await new Promise((r) => setTimeout(r, 250))
      }
    }
    expect(await until(running)).toMatchObject({ status: "done" })
    expect(await until(queued)).toMatchObject({ status: "done" })

    const stopped = await d.roster(["server", "stop"])
    expect(stopped.stdout).toContain(`roster server stopped (pid ${live.pid})`)
    expect(fs.existsSync(stateFile)).toBe(false)
    expect(fs.existsSync(d.file("state", "daemon.lock"))).toBe(false)
    expect(chainRules(chain)).toEqual([])
    // And the deployment starts again as usual.
    expect((await d.roster(["server", "start"])).code).toBe(0)
  })
})
