import Dockerode from "dockerode"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { egressChainName, lockdownNetworkName } from "../../src/contract/deployment.js"
import { collect, ROSTER_BIN } from "../support/deployment.js"
import { spawn } from "node:child_process"

const docker = new Dockerode()

describe("roster doctor (real engine, real iptables)", () => {
  // A deployment that is gone: its config root was a temp dir, its daemon never runs again.
  const gone = fs.mkdtempSync(path.join(os.tmpdir(), "roster-gone-"))
  const goneConfig = path.join(gone, "config")
  const net = lockdownNetworkName(goneConfig)
  const chain = egressChainName(goneConfig)
  const home = fs.mkdtempSync(path.join(os.tmpdir(), "roster-doctor-"))
  const roster = (...args: ReadonlyArray<string>) =>
    collect(spawn(ROSTER_BIN, [...args], { env: { ...process.env, ROSTER_HOME: home, HOME: home }, stdio: ["ignore", "pipe", "pipe"] }))

  afterAll(async () => {
    try {
      execFileSync("iptables", ["-D", "INPUT", "-s", "10.254.254.0/24", "-m", "addrtype", "--dst-type", "LOCAL", "-j", chain], { stdio: "ignore" })
    } catch {
      // already removed by the test
    }
    for (const args of [["-F", chain], ["-X", chain]]) {
      try {
        execFileSync("iptables", args, { stdio: "ignore" })
      } catch {
        // already removed
      }
    }
    await docker.getNetwork(net).remove().catch(() => undefined)
  })

  it("lists a stale network and chain with the deployment they belong to, and --fix removes them", async () => {
    await docker.createNetwork({
      Name: net, Driver: "bridge", Internal: true,
      Labels: { "roster.network": "locked", "roster.deployment": goneConfig, "roster.state": path.join(gone, "state") }
    })
    execFileSync("iptables", ["-N", chain])
    execFileSync("iptables", ["-A", chain, "-j", "DROP"])
    execFileSync("iptables", ["-I", "INPUT", "-s", "10.254.254.0/24", "-m", "addrtype", "--dst-type", "LOCAL", "-j", chain])

    const listed = await roster("doctor", "--json")
    expect(listed.code, listed.stderr).toBe(0)
    const found = (JSON.parse(listed.stdout) as { lockdown: Array<{ deployment: string | null; stale: boolean; chain: { name: string; jumps: number } | null; network: { name: string } | null }> }).lockdown
    expect(found.find((d) => d.deployment === goneConfig)).toMatchObject({ stale: true, network: { name: net }, chain: { name: chain, jumps: 1 } })

    const fixed = await roster("doctor", "--fix")
    expect(fixed.code, fixed.stderr).toBe(0)
    expect(fixed.stdout).toContain(`removed chain ${chain} and its 1 jump(s)`)
    expect(fixed.stdout).toContain(`removed network ${net}`)
    expect(execFileSync("iptables", ["-S"]).toString()).not.toContain(chain)
    expect((await docker.listNetworks({ filters: { name: [net] } })).filter((n) => n.Name === net)).toEqual([])
  })
  it("says which runtime boxes get and, with gVisor unregistered, prints the daemon.json lines; --fix registers it, keeping what the file had", async () => {
    const daemonJson = "/etc/docker/daemon.json"
    const saved = fs.readFileSync(daemonJson, "utf8")
    const runtimes = async () => Object.keys((await docker.info()).Runtimes ?? {})
    const reload = async (want: boolean) => {
      execFileSync("sh", ["-c", "kill -HUP $(cat /var/run/docker.pid)"])
      for (let i = 0; i < 100 && (await runtimes()).includes("runsc") !== want; i++) await new Promise((r) => setTimeout(r, 100))
      expect((await runtimes()).includes("runsc")).toBe(want)
    }
    const registered = await roster("doctor")
    expect(registered.code, registered.stderr).toBe(0)
    expect(registered.stdout).toContain(`runtime: boxes run under runsc (gVisor) ([box] runtime = "auto")`)
    expect(registered.stdout).toMatch(/^ {2}runsc: {3}installed at \/\S+\/runsc, registered with Docker$/m)
    try {
      fs.writeFileSync(daemonJson, JSON.stringify({ "log-level": "info", runtimes: {} }))
      await reload(false)
      const missing = await roster("doctor", "--json")
      expect(JSON.parse(missing.stdout).runtime).toMatchObject({ setting: "auto", registered: false, boxes_run_under: "runc" })
      const told = await roster("doctor")
      expect(told.stdout).toContain("boxes run under runc (the host's kernel)")
      expect(told.stdout).toMatch(/add to \/etc\/docker\/daemon\.json \(keeping what it has\) \{"runtimes":\{"runsc":\{"path":"\/\S+\/runsc","runtimeArgs":\["--network=host"\]\}\}\}/)
      expect(told.stdout).toContain("roster doctor --fix")

      const fixed = await roster("doctor", "--fix")
      expect(fixed.code, fixed.stderr).toBe(0)
      expect(fixed.stdout).toContain("registered gVisor: /etc/docker/daemon.json has runtime runsc")
      expect(fixed.stdout).toContain("boxes run under runsc (gVisor)")
      expect(await runtimes()).toContain("runsc")
      const written = JSON.parse(fs.readFileSync(daemonJson, "utf8"))
      expect(written["log-level"]).toBe("info")
      expect(written.runtimes.runsc.runtimeArgs).toEqual(["--network=host"])
    } finally {
      fs.writeFileSync(daemonJson, saved)
      await reload(true)
    }
  })
})
