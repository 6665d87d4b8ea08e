import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { egressChainName, lockdownNetworkName } from "../../src/contract/deployment.js"
import { type Deployment, freePort, makeDeployment, TEST_IMAGE } from "../support/deployment.js"
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

describe("the gateway's CA (real daemon, real engine)", () => {
  let d: Deployment

  beforeAll(async () => {
    d = await makeDeployment("", undefined, undefined, { start: false })
  })
  afterAll(async () => {
    await d?.stop()
  })

  it("half a CA (its key removed) or one it cannot read: the daemon refuses to start, naming the file and the fix, and changes nothing; whole again, it starts", async () => {
    // The first start makes the CA; a stop keeps it.
    expect((await d.roster(["server", "start"])).code).toBe(0)
    expect((await d.roster(["server", "stop"])).code).toBe(0)
    const key = d.file("state", "ca", "ca.key")
    const cert = d.file("state", "ca", "ca.crt")
    const kept = fs.readFileSync(key)
    const certBefore = fs.readFileSync(cert, "utf8")
    const network = () => execFileSync("docker", ["network", "ls", "--format", "{{.Name}}"]).toString().split("\n").filter((n) => n.includes(lockdownNetworkName(d.file("config"))))
    fs.rmSync(key)
    const refused = await d.roster(["server", "start", "--foreground"])
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain(`${key} is missing beside ${cert}`)
    expect(refused.stderr).toContain("restore it from a backup")
    // Nothing changed: no new CA, no state file, no network left, no lock.
    expect(fs.existsSync(key)).toBe(false)
    expect(fs.readFileSync(cert, "utf8")).toBe(certBefore)
    expect(fs.existsSync(d.file("state", "gateway.json"))).toBe(false)
    expect(fs.existsSync(d.file("state", "daemon.lock"))).toBe(false)
    expect(network()).toEqual([])
    // Unreadable (a key the daemon's user may not read): refused the same way. (As root a mode does not
    // bar a read: the key is made a directory instead, which no one reads as a file.)
    fs.mkdirSync(key)
    const unreadable = await d.roster(["server", "start", "--foreground"])
    expect(unreadable.code).toBe(1)
    expect(unreadable.stderr).toContain(`${key} cannot be read`)
    fs.rmSync(key, { recursive: true })
    fs.writeFileSync(key, kept, { mode: 0o600 })
    expect((await d.roster(["server", "start"])).code).toBe(0)
    expect(fs.readFileSync(cert, "utf8")).toBe(certBefore)
  })
})

describe("the daemon's image pull at start (a real registry on loopback: Debian's docker-registry)", () => {
  let registry: ChildProcess | undefined
  let d: Deployment | undefined
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "roster-registry-"))
  afterAll(async () => {
    await d?.stop()
    registry?.kill("SIGKILL")
    fs.rmSync(dir, { recursive: true, force: true })
  })

  it("a deployment on a registry ref pulls it at start; a newer build pushed under the same tag is pulled at the next start, said as \"box image updated\"", async () => {
    const port = await freePort()
    fs.writeFileSync(path.join(dir, "config.yml"), [
      "version: 0.1", "storage:", "  filesystem:", `    rootdirectory: ${path.join(dir, "data")}`, "http:", `  addr: 127.0.0.1:${port}`
    ].join("\n"))
    registry = spawn("docker-registry", ["serve", path.join(dir, "config.yml")], { stdio: "ignore" })
    const up = Date.now() + 20_000
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${port}/v2/`).then((r) => r.status === 200, () => false)
      if (ok) break
      if (Date.now() > up) throw new Error("the test's registry did not answer in 20 s (is Debian's docker-registry installed? scripts/ensure-host.sh installs it)")
      await new Promise((r) => setTimeout(r, 200))
    }
    const ref = `127.0.0.1:${port}/roster-it/box:latest`
    const docker = (...args: Array<string>) => execFileSync("docker", args, { stdio: ["ignore", "pipe", "pipe"] }).toString()
    try {
      docker("tag", TEST_IMAGE, ref)
      docker("push", ref)
      docker("rmi", ref)
      // First start: the image is only in the registry; the daemon pulls it (in the background).
      d = await makeDeployment("", ref)
      const until = async (what: string, ok: () => boolean) => {
        const end = Date.now() + 60_000
        while (!ok()) {
          if (Date.now() > end) throw new Error(`${what}: not within 60 s; the daemon's log:\n${fs.readFileSync(d!.file("state", "gateway.log"), "utf8").slice(-2000)}`)
          await new Promise((r) => setTimeout(r, 250))
        }
      }
      const present = () => spawnSync("docker", ["image", "inspect", ref], { stdio: "ignore" }).status === 0
      await until("the image pulled at the first start", present)
      // A newer build under the same tag, pushed; this machine keeps the older one.
      fs.writeFileSync(path.join(dir, "Dockerfile"), `FROM ${ref}\nLABEL org.roster.test-build=2\n`)
      docker("build", "-q", "-t", ref, dir)
      docker("push", ref)
      docker("tag", TEST_IMAGE, ref)
      expect((await d.roster(["server", "stop"])).code).toBe(0)
      const logBefore = fs.readFileSync(d.file("state", "gateway.log"), "utf8").length
      expect((await d.roster(["server", "start"])).code).toBe(0)
      await until("the newer image said", () => fs.readFileSync(d!.file("state", "gateway.log"), "utf8").slice(logBefore).includes(`box image updated: ${ref}`))
      expect(docker("image", "inspect", "--format", "{{index .Config.Labels \"org.roster.test-build\"}}", ref).trim()).toBe("2")
    } finally {
      spawnSync("docker", ["rmi", "-f", ref], { stdio: "ignore" })
    }
  }, 240_000)
})

describe("roster server start --addr: where the gateway listens and boxes reach it (real daemon, real engine, iptables)", () => {
  let d: Deployment
  beforeAll(async () => {
    d = await makeDeployment("[box]\negress_lockdown = true\n", undefined, undefined, { start: false })
  })
  afterAll(async () => {
    await d?.stop()
    if (d) {
      removeLockdownRules(egressChainName(d.file("config")))
      spawnSync("docker", ["network", "rm", lockdownNetworkName(d.file("config"))], { stdio: "ignore" })
    }
  })

  it("an address boxes cannot reach is refused at start with the fix, changing nothing; a second address of the locked network's bridge is where boxes then reach the gateway, its lockdown included", async () => {
    for (const [addr, why] of [["10.213.78.9", "reach only addresses in that subnet"], ["127.0.0.2", "only loopback is named"]] as const) {
      const r = await d.roster(["server", "start", "--foreground", "--addr", addr])
      expect(r.code, addr).toBe(1)
      expect(r.stderr, addr).toContain(why)
      expect(fs.existsSync(d.file("state", "gateway.json")), addr).toBe(false)
    }
    expect((await d.roster(["server", "start", "--addr", "not-an-ip"])).stderr).toContain("not-an-ip is not an IP address")
    // The locked network made beforehand, as roster makes it, on a subnet of the test's own, with a second address on its bridge.
    const name = lockdownNetworkName(d.file("config"))
    const makeNetwork = () => {
      spawnSync("docker", ["network", "rm", name], { stdio: "ignore" })
      return execFileSync("docker", ["network", "create", "--internal", "--subnet", "10.213.77.0/24", "--gateway", "10.213.77.1",
        "-o", "com.docker.network.bridge.enable_icc=false", "-o", "com.docker.network.bridge.enable_ip_masquerade=false",
        "--label", "roster.network=locked", "--label", `roster.deployment=${d.file("config")}`, "--label", `roster.state=${d.file("state")}`, name]).toString().trim()
    }
    // In its subnet but no address of this machine: the bind says so (and the start it failed removes the network it held).
    makeNetwork()
    const unbound = await d.roster(["server", "start", "--foreground", "--addr", "10.213.77.99"])
    expect(unbound.code).toBe(1)
    expect(unbound.stderr).toContain("10.213.77.99 is not an address of this machine")
    const id = makeNetwork()
    execFileSync("ip", ["addr", "add", "10.213.77.250/24", "dev", `br-${id.slice(0, 12)}`])
    const started = await d.roster(["server", "start", "--addr", "10.213.77.250"])
    expect(started.code, started.stderr).toBe(0)
    const state = JSON.parse(fs.readFileSync(d.file("state", "gateway.json"), "utf8")) as { addrs: Array<string>; box_addr: string }
    expect(state).toMatchObject({ addrs: ["127.0.0.1", "10.213.77.250"], box_addr: "10.213.77.250" })
    // A box finds the gateway there: host.docker.internal is that address, and an action posted to it
    // is answered once its preflight passed (it reached the gateway, lockdown on).
    const act = `act() { tok=\${HTTP_PROXY#*://}; tok=\${tok%%:*}; rm -f /tmp/.q /tmp/.a; mkfifo /tmp/.q; ` +
      `nc -w 10 host.docker.internal \${ROSTER_GATEWAY##*:} </tmp/.q >/tmp/.a & p=$!; ` +
      `{ printf 'POST /v1/actions/%s HTTP/1.0\\r\\nAuthorization: Bearer %s\\r\\nContent-Length: %s\\r\\n\\r\\n%s' "$1" "$tok" "\${#2}" "$2"; ` +
      `while kill -0 $p 2>/dev/null; do usleep 10000; done; } >/tmp/.q; head -n 1 /tmp/.a | tr -d '\\r'; }; `
    const run = await d.roster(["worker", "run", "alice", `!grep host.docker.internal /etc/hosts; ${act}act message_user '{"text":"reached it"}'`])
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).toContain("message from alice: reached it")
    const runs = fs.readdirSync(d.file("data", "runs", "alice")).sort()
    const dir = d.file("data", "runs", "alice", runs.at(-1)!)
    const said = fs.readFileSync(path.join(dir, "stdout.jsonl"), "utf8")
    expect(said).toMatch(/10\.213\.77\.250\s+host\.docker\.internal/)
    expect(said).toContain("HTTP/1.1 200 OK")
    expect(fs.readFileSync(path.join(dir, "events.jsonl"), "utf8")).toContain(`"kind":"preflight","result":{"ok":true`)
  }, 180_000)
})
