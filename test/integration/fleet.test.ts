import Dockerode from "dockerode"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { lockdownNetworkName } from "../../src/contract/deployment.js"
import { SCHEMA_VERSION } from "../../src/fleet/migrations.js"
import { answersOf, askScript, nextHeld } from "../support/ask.js"
import { collect, type Deployment, makeDeployment } from "../support/deployment.js"
import { makeOutsideHost } from "../support/netns.js"
import { latestRunId } from "../support/runs.js"
import { type Postgres, startPostgres } from "../support/postgres.js"
import { CHROMIUM, startWeb } from "../support/web.js"
import { chromium } from "playwright-core"
import { execFileSync } from "node:child_process"
import * as http from "node:http"
import * as net from "node:net"
import { egressChainName } from "../../src/contract/deployment.js"
import { signRequest } from "../../src/fleet/rpc/sign.js"
import { removeLockdownRules } from "../support/lockdownRules.js"
import { warmBoxOf } from "../support/warmBoxes.js"

/**
 * An interface of this host the test makes (one end of a veth pair, the other end left on the host,
 * with a TEST-NET address): "this machine's address on the fleet's network".
 */
const fleetInterface = () => {
  const name = `rfl${process.pid % 100_000}`
  const address = `203.0.113.${10 + (process.pid % 200)}`
  execFileSync("ip", ["link", "add", name, "type", "veth", "peer", "name", `${name}p`])
  execFileSync("ip", ["addr", "add", `${address}/32`, "dev", name])
  for (const end of [name, `${name}p`]) execFileSync("ip", ["link", "set", end, "up"])
  return { name, address, remove: () => execFileSync("ip", ["link", "del", name]) }
}

const freePort = (host: string) =>
  new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, host, () => {
      const { port } = s.address() as net.AddressInfo
      s.close(() => resolve(port))
    })
  })

const rpcGet = (host: string, port: number, p: string, headers: Record<string, string> = {}) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    http.get({ host, port, path: p, headers, agent: false }, (res) => {
      let body = ""
      res.on("data", (c: Buffer) => (body += c.toString()))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }))
    }).once("error", reject)
  })

const docker = new Dockerode()

interface FleetNode {
  readonly name: string
  readonly state: string
  readonly config_differs: ReadonlyArray<string>
  readonly boxes: number
  readonly concurrency: number
}
interface Fleet {
  readonly node: string
  readonly reachable: boolean
  readonly detail: string | null
  readonly schema: number
  readonly nodes: ReadonlyArray<FleetNode>
}

const fleetOf = async (d: Deployment): Promise<Fleet | undefined> => {
  const r = await d.roster(["server", "status", "--json"])
  if (r.code !== 0) throw new Error(`server status failed: ${r.stderr}`)
  return (JSON.parse(r.stdout) as { supervisor?: { fleet?: Fleet } }).supervisor?.fleet
}

/** Polls `server status` until `ok` holds of the fleet it shows (each poll's view kept for the failure message). */
const until = async (d: Deployment, ok: (f: Fleet) => boolean, ms = 20_000): Promise<Fleet> => {
  const end = Date.now() + ms
  let last: Fleet | undefined
  while (Date.now() < end) {
    last = await fleetOf(d)
    if (last && ok(last)) return last
    await new Promise((r) => setTimeout(r, 300))
  }
  throw new Error(`the fleet never got there; last seen: ${JSON.stringify(last)}`)
}

/** A task's id from `task add`'s output, and a poll of its record until it is running (the record either way). */
const addTask = async (d: Deployment, worker: string, prompt: string) => {
  const added = await d.roster(["task", "add", worker, prompt])
  const id = /task (t-[0-9a-f]{8}) queued/.exec(added.stdout)?.[1] ?? ""
  const show = async () => JSON.parse((await d.roster(["task", "show", id, "--json"])).stdout) as { status: string; node?: string }
  const by = Date.now() + 30_000
  while ((await show()).status !== "running" && Date.now() < by) await new Promise((r) => setTimeout(r, 200))
  return { id, show }
}

describe("a fleet on Postgres: nodes, heartbeats, the shared folder (real Postgres 15, real daemons)", () => {
  let pg: Postgres
  const shared = fs.mkdtempSync(path.join(os.tmpdir(), "roster-shared-"))
  const elsewhere = fs.mkdtempSync(path.join(os.tmpdir(), "roster-not-shared-"))
  const deployments: Array<Deployment> = []
  const cluster = (listen?: string) =>
    `[cluster]\ndatabase = "${pg.url}"\nshared_data = "${shared}"\nnode_timeout_s = 6\n${listen ? `listen = "${listen}"\n` : ""}`
  let a: Deployment
  let b: Deployment
  // This machine's address on "the fleet's network": an interface of its own the test makes, with a
  // TEST-NET address. node-a names the interface (the form one org.toml serves every node with), node-b the address.
  let fleetNet: ReturnType<typeof fleetInterface>
  let rpcA = ""
  let rpcB = ""
  const orgA = () => cluster(`${fleetNet.name}:${rpcA.split(":")[1]}`)

  beforeAll(async () => {
    pg = await startPostgres()
    fleetNet = fleetInterface()
    rpcA = `${fleetNet.address}:${await freePort(fleetNet.address)}`
    rpcB = `${fleetNet.address}:${await freePort(fleetNet.address)}`
    a = await makeDeployment(orgA(), undefined, undefined, { env: { ROSTER_NODE: "node-a", PGPASSWORD: pg.password } })
    deployments.push(a)
    // b keeps its password in the vault, not in its environment.
    b = await makeDeployment(cluster(rpcB), undefined, undefined, { env: { ROSTER_NODE: "node-b", PW: pg.password }, start: false })
    deployments.push(b)
    const stored = await b.roster(["connection", "add", "postgres", "--from-env", "PW"])
    expect(stored.code, stored.stderr).toBe(0)
    const started = await b.roster(["server", "start"])
    expect(started.code, started.stdout + started.stderr).toBe(0)
  })

  afterAll(async () => {
    for (const d of deployments) await d.stop().catch(() => undefined)
    pg?.remove()
    fleetNet?.remove()
    fs.rmSync(shared, { recursive: true, force: true })
    fs.rmSync(elsewhere, { recursive: true, force: true })
  })

  it("two daemons are two nodes: both up with the schema, the shared folder marked with the database's fleet", async () => {
    const f = await until(a, (x) => x.nodes.filter((n) => n.state === "up").length === 2)
    expect(f.node).toBe("node-a")
    expect(f.schema).toBe(SCHEMA_VERSION)
    expect(f.nodes.map((n) => n.name)).toEqual(["node-a", "node-b"])
    expect(f.nodes.every((n) => n.concurrency === 2)).toBe(true)
    expect(pg.sql("SELECT count(*) FROM roster_migrations")).toBe(String(SCHEMA_VERSION))
    const marker = JSON.parse(fs.readFileSync(path.join(shared, ".roster-fleet.json"), "utf8")) as { fleet: string }
    expect(marker.fleet).toBe(pg.sql("SELECT id FROM roster_fleet"))
    const text = await a.roster(["server", "status"])
    expect(text.stdout).toMatch(new RegExp(`fleet: node node-a, 2 of 2 nodes up \\(database 127\\.0\\.0\\.1:\\d+/roster, schema ${SCHEMA_VERSION}\\)`))
    expect(text.stdout).toMatch(/node-a\s+up\s+beat [\d.]+s ago\s+0\/2 boxes.*\(this node\)/)
    expect(text.stdout).not.toContain(pg.password)
    const doctor = await a.roster(["doctor"])
    expect(doctor.stdout).toContain("fleet: node node-a, database 127.0.0.1")
    expect(doctor.stdout).toContain("— connected")
    expect(doctor.stdout).toContain(`schema:      ${SCHEMA_VERSION}, this roster's`)
    expect(doctor.stdout).toContain(`shared data: ${shared} — writable, the fleet's (${marker.fleet})`)
    expect(doctor.stdout).toMatch(/clocks: {6}this machine [+-]\d+ ms from the database's; nodes at their last beat: node-a [+-]\d+ ms, node-b/)
    const json = JSON.parse((await a.roster(["doctor", "--json"])).stdout) as { fleet: { connected: boolean; schema: { found: number } } }
    expect(json.fleet).toMatchObject({ connected: true, schema: { found: SCHEMA_VERSION, known: SCHEMA_VERSION } })
  })

  it("each node's runner RPC listens where [cluster] listen says (an interface or an address) and answers the others' signed calls; status and doctor show it", async () => {
    const text = (await a.roster(["server", "status"])).stdout
    // node-a named its interface: it advertises the interface's address.
    expect(text).toMatch(new RegExp(`node-a .*  rpc ${rpcA.replaceAll(".", "\\.")} \\d+ ms`))
    expect(text).toMatch(new RegExp(`node-b .*  rpc ${rpcB.replaceAll(".", "\\.")} \\d+ ms`))
    const doctor = (await b.roster(["doctor"])).stdout
    expect(doctor).toMatch(new RegExp(`runner RPC: {2}listens on ${rpcB.replaceAll(".", "\\.")}; reached: node-a \\d+ ms, node-b \\d+ ms`))
    // What a call needs: the fleet's key, made once in the database; without it, refused.
    const [host, port] = [fleetNet.address, Number(rpcA.split(":")[1])]
    expect(await rpcGet(host, port, "/v1/node")).toMatchObject({ status: 401 })
    const key = Buffer.from(pg.sql("SELECT key FROM roster_rpc_key"), "hex")
    expect(key.length).toBe(32)
    const signed = await rpcGet(host, port, "/v1/node", signRequest(key, { method: "GET", path: "/v1/node", node: "node-b", body: "" }, Date.now()))
    expect(signed.status).toBe(200)
    expect(JSON.parse(signed.body)).toMatchObject({ node: "node-a" })
    // A body of unknown length is refused before anything is read or checked.
    const chunked = await new Promise<string>((resolve, reject) => {
      const s = net.connect(port, host, () => s.end("POST /v1/approvals/nudge HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"))
      let text = ""
      s.on("data", (c: Buffer) => (text += c.toString()))
      s.once("close", () => resolve(text))
      s.once("error", reject)
    })
    expect(chunked).toMatch(/^HTTP\/1\.1 411/)
  })

  it("a node whose config differs is named with the file; the per-node keys (node, gateway port) never count", async () => {
    // The two org.toml files already differ in [gateway] port, and the nodes in ROSTER_NODE.
    expect((await fleetOf(a))?.nodes.find((n) => n.name === "node-b")?.config_differs).toEqual([])
    fs.appendFileSync(b.file("config", "org.toml"), "\n[budget]\nrun_usd = 5\n")
    const f = await until(a, (x) => x.nodes.find((n) => n.name === "node-b")?.config_differs.length === 1)
    expect(f.nodes.find((n) => n.name === "node-b")?.config_differs).toEqual(["org.toml"])
    const text = await a.roster(["server", "status"])
    expect(text.stdout).toContain("node-b's config differs from this node's: org.toml")
    expect((await a.roster(["doctor"])).stdout).toContain("node-b's config differs from this node's: org.toml")
  })

  it("refuses to join, having changed nothing, with the fix: a wrong password, a folder not the fleet's, a name a live node holds", async () => {
    const c = await makeDeployment(cluster(), undefined, undefined, { env: { ROSTER_NODE: "node-c", PGPASSWORD: "not-the-password" }, start: false })
    deployments.push(c)
    const wrong = await c.roster(["server", "start"])
    expect(wrong.code).not.toBe(0)
    expect(wrong.stdout + wrong.stderr).toMatch(/password authentication failed.*roster connection add postgres/)

    c.env.PGPASSWORD = pg.password
    c.writeOrg(cluster().replace(shared, elsewhere))
    const folder = await c.roster(["server", "start"])
    expect(folder.code).not.toBe(0)
    expect(folder.stdout + folder.stderr).toContain(`[cluster] shared_data ${elsewhere}: holds no .roster-fleet.json, though the fleet exists`)

    // A runner RPC a box could reach (every address), or on an address this machine does not have (a bridge's is unit-tested).
    for (const [listen, why] of [["0.0.0.0:7399", "is every address of this machine, the box networks' among them"], ["198.51.100.99:7399", "is not an address of this machine (of an interface that is up)"]]) {
      c.writeOrg(cluster(listen))
      const open = await c.roster(["server", "start"])
      expect(open.code).not.toBe(0)
      expect(open.stdout + open.stderr).toContain(`[cluster] listen ${listen} (`)
      expect(open.stdout + open.stderr).toContain(`${why} — name this machine's own address`)
    }
    expect((await fleetOf(a))?.nodes.map((n) => n.name)).toEqual(["node-a", "node-b"])

    c.writeOrg(cluster())
    c.env.ROSTER_NODE = "node-a"
    const taken = await c.roster(["server", "start"])
    expect(taken.code).not.toBe(0)
    expect(taken.stdout + taken.stderr).toMatch(/node "node-a" is already in the fleet \(pid \d+ .*ROSTER_NODE/)
    // Refused before the network: the deployment's box network was never made.
    const nets = await docker.listNetworks({ filters: { name: [lockdownNetworkName(c.file("config"))] } })
    expect(nets).toEqual([])
    expect((await fleetOf(a))?.nodes.map((n) => n.name)).toEqual(["node-a", "node-b"])
  })

  it("a Postgres outage mid-run: the node keeps its box and says so, then is back by itself and the task's end is recorded", async () => {
    const { show } = await addTask(a, "alice", "!sleep 3")
    expect((await show()).status).toBe("running")
    pg.stop()
    try {
      const down = await until(a, (x) => !x.reachable, 20_000)
      expect(down.detail).not.toBeNull()
      const text = await a.roster(["server", "status"])
      expect(text.stdout).toContain("the database does not answer")
      // Its box (3 s) ends before the node's own cut-off (node_timeout_s 6 less two beats: 4 s without a beat).
      expect(text.stdout).toMatch(/this node retries at every heartbeat|cut off from the fleet's database/)
      // The box goes on without the database, and ends while it is still down.
      const boxes = () => docker.listContainers({ filters: { label: [`roster.deployment=${a.file("config")}`] } })
      const goneBy = Date.now() + 20_000
      while ((await boxes()).length > 0 && Date.now() < goneBy) await new Promise((r) => setTimeout(r, 200))
      expect(await boxes()).toEqual([])
      expect((await a.roster(["server", "status"])).code).toBe(0)
    } finally {
      pg.start()
    }
    const back = await until(a, (x) => x.reachable && x.nodes.find((n) => n.name === "node-a")?.state === "up", 30_000)
    expect(back.nodes.find((n) => n.name === "node-b")?.state).toBe("up")
    // The box ended while the database was down; its end went in once the database answered.
    const endBy = Date.now() + 30_000
    while ((await show()).status === "running" && Date.now() < endBy) await new Promise((r) => setTimeout(r, 300))
    expect(await show()).toMatchObject({ status: "done" })
  })

  it("a cancel from another node reaches the box on the node that runs it", async () => {
    for (const d of [a, b]) expect((await d.roster(["worker", "add", "carol"])).code).toBe(0)
    const { id, show } = await addTask(a, "carol", "!sleep 60")
    const running = await show()
    expect(running.status).toBe("running")
    const [owner, other] = running.node === "node-a" ? [a, b] : [b, a]
    const boxes = () => docker.listContainers({ filters: { label: [`roster.deployment=${owner.file("config")}`, "roster.worker=carol"] } })
    expect(await boxes()).toHaveLength(1)
    const started = Date.now()
    const cancelled = await other.roster(["task", "cancel", id])
    expect(cancelled.code, cancelled.stderr).toBe(0)
    expect(cancelled.stdout).toContain(`task ${id} cancelled`)
    expect(Date.now() - started).toBeLessThan(15_000)
    expect(await boxes()).toEqual([])
  })

  it("a run tainted on one node, untainted by a person on another: both decisions are rows of the fleet's taint log, and both nodes see them", async () => {
    const r = await a.roster(["worker", "run", "alice", askScript(a, "fleet-taint.sh", ["exfil.example.test:443 exfil"], shared)])
    expect(r.code, r.stderr).toBe(0)
    const runs = path.join(shared, "runs", "alice")
    const runId = latestRunId(runs)
    expect(answersOf(fs.readFileSync(path.join(runs, runId, "stdout.jsonl"), "utf8")).exfil).toContain("HTTP/1.1 403")
    // Every run of the fleet is in the run index (the daemons' tasks and this CLI's run), and another node lists from it.
    // Runs are the folders with a record (a warm box waiting for a run has a folder, and no record).
    const folders = fs.readdirSync(path.join(shared, "runs")).flatMap((w) =>
      fs.readdirSync(path.join(shared, "runs", w)).filter((id) => fs.existsSync(path.join(shared, "runs", w, id, "run.json"))))
    expect(pg.sql("SELECT count(*) FROM roster_runs")).toBe(String(folders.length))
    expect(pg.sql(`SELECT node || ' ' || ended_by FROM roster_runs WHERE run_id = '${runId}'`)).toBe("node-a exit")
    const listed = JSON.parse((await b.roster(["runs", "list", "--json", "--limit", "1"])).stdout) as Array<{ run_id: string; node: string }>
    expect(listed).toMatchObject([{ run_id: runId, node: "node-a" }])
    // node-a's gateway says where the run's requests begin in its audit log (every 5 s); node-b reads them from there.
    const indexed = () => Number(pg.sql(`SELECT coalesce(sum(requests), 0) FROM roster_audit WHERE run_id = '${runId}' AND node = 'node-a'`))
    const requests = (JSON.parse((await b.roster(["runs", "show", runId, "--json"])).stdout) as { gateway_requests: Array<{ host: string }> }).gateway_requests
    expect(requests.map((q) => q.host)).toContain("exfil.example.test")
    const by = Date.now() + 15_000
    while (indexed() < requests.length && Date.now() < by) await new Promise((r) => setTimeout(r, 250))
    expect(indexed()).toBe(requests.length)
    const before = await b.roster(["runs", "show", runId])
    expect(before.stdout).toContain("node:      node-a")
    expect(before.stdout).toContain("tainted:   egress_refused (exfil.example.test): no_rule")
    const untainted = await b.roster(["runs", "untaint", runId, "--reason", "looked at it from node-b"])
    expect(untainted.code, untainted.stderr).toBe(0)
    // Both decisions are rows of the fleet's taint log, each by the node that made it; no events file holds one.
    expect(pg.sql(`SELECT string_agg(node || ' ' || (event->>'kind'), ',' ORDER BY seq) FROM roster_taints WHERE run_id = '${runId}'`)).toBe("node-a taint,node-b untaint")
    for (const f of fs.readdirSync(path.join(runs, runId)).filter((n) => n.startsWith("events"))) {
      expect(fs.readFileSync(path.join(runs, runId, f), "utf8"), f).not.toMatch(/"kind":"(un)?taint"/)
    }
    for (const d of [a, b]) {
      const shown = await d.roster(["runs", "show", runId])
      expect(shown.stdout).toContain("looked at it from node-b")
      expect(shown.stdout).not.toContain(`roster runs untaint ${runId} --reason`)
    }
  })

  it("roster web on one node shows the fleet in a real browser: another node's run with its node, its requests from that node's audit log, the tasks' nodes, its live box", async () => {
    const runs = path.join(shared, "runs", "alice")
    const runId = latestRunId(runs)
    const ui = await startWeb(b.env)
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] })
    try {
      const page = await (await browser.newContext()).newPage()
      const errors: Array<string> = []
      page.on("pageerror", (e) => errors.push(e.message))
      await page.goto(ui.loginUrl)
      await page.goto(`http://127.0.0.1:${ui.port}/runs`)
      const heads = await page.locator("thead th").allInnerTexts()
      const row = page.locator("tbody tr", { has: page.locator(`a[href='/runs/${runId}']`) })
      expect((await row.locator("td").allInnerTexts())[heads.indexOf("Node")]).toBe("node-a")
      await page.goto(`http://127.0.0.1:${ui.port}/runs/${runId}`)
      expect(await page.locator("dl.facts").innerText()).toMatch(/Node\s+node-a/)
      expect(await page.locator("ol.timeline").innerText()).toContain("exfil.example.test")
      // The tasks of the earlier tests, each with the node that ran it, as the queue says.
      await page.goto(`http://127.0.0.1:${ui.port}/tasks`)
      const taskHeads = await page.locator("thead th").allInnerTexts()
      const shownNodes = Object.fromEntries(await page.locator("tbody tr").evaluateAll((rows, at) =>
        rows.map((r) => [r.querySelector("td")?.textContent ?? "", r.querySelectorAll("td")[at]?.textContent ?? ""]), taskHeads.indexOf("Node")))
      const queue = JSON.parse((await b.roster(["task", "list", "--json"])).stdout) as Array<{ task_id: string; node?: string }>
      expect(queue.length).toBeGreaterThan(0)
      expect(shownNodes).toEqual(Object.fromEntries(queue.map((t) => [t.task_id, t.node ?? "—"])))
      // A box live on node-a is on node-b's Now page, under its node (node-a's runner RPC asked for it).
      const live = a.spawn(["worker", "run", "alice", "!sleep 30"])
      try {
        let now = ""
        for (let i = 0; i < 40 && !/Node node-a \(1 live\)/.test(now); i++) {
          await new Promise((r) => setTimeout(r, 500))
          await page.goto(`http://127.0.0.1:${ui.port}/`)
          now = await page.locator("#now").innerText()
        }
        expect(now).toContain("Elsewhere in the fleet")
        expect(now).toMatch(/Node node-a \(1 live\)/)
        const cells = await page.locator("table[data-node='node-a'] tbody tr td").allInnerTexts()
        expect(cells.slice(0, 1)).toEqual(["alice"])
        expect(cells[1]).toMatch(/^\d{4}-\d{2}-\d{2}-/)
        expect(await page.locator(`table[data-node='node-a'] a[href='/runs/${cells[1]}']`).count()).toBe(1)
      } finally {
        live.kill("SIGTERM")
        await new Promise((r) => live.once("close", r))
      }
      expect(errors).toEqual([])
    } finally {
      await browser.close()
      ui.process.kill("SIGTERM")
    }
  })

  it("a box cannot reach a node's runner RPC, lockdown off or on: not at the node's address, not at its bridge", async () => {
    const port = rpcA.split(":")[1]
    const dir = path.join(shared, "stores", "alice")
    fs.mkdirSync(dir, { recursive: true })
    fs.writeFileSync(path.join(dir, "rpc-probe.sh"), [
      `for at in "${fleetNet.address} ${port}" "host.docker.internal ${port}"; do`,
      `  echo "--- $at"; printf 'GET /v1/node HTTP/1.0\r\n\r\n' | nc -w 3 $at; echo "rc=$?"`,
      "done"
    ].join("\n"), { mode: 0o755 })
    const probe = async () => {
      const r = await a.roster(["worker", "run", "alice", "!sh /pihome/store/rpc-probe.sh"])
      expect(r.code, r.stderr).toBe(0)
      const runs = path.join(shared, "runs", "alice")
      return fs.readFileSync(path.join(runs, latestRunId(runs), "stdout.jsonl"), "utf8")
    }
    const chain = egressChainName(a.file("config"))
    try {
      const open = await probe()
      expect(open).toContain(`--- ${fleetNet.address} ${port}`)
      expect(open).toContain("--- host.docker.internal")
      expect(open).not.toContain("HTTP/1.")
      expect(open).not.toContain("node-a")
      // Lockdown off, the box's packets did reach the node's address: the RPC itself closed the door, and said so.
      expect(fs.readFileSync(a.file("state", "gateway.log"), "utf8")).toMatch(/the runner RPC closed a connection from [\d.]+: it comes from the network of br-/)

      a.writeOrg(`${orgA()}[box]\negress_lockdown = true\n`)
      const locked = await probe()
      expect(locked).toContain(`--- ${fleetNet.address} ${port}`)
      expect(locked).not.toContain("HTTP/1.")
      expect(execFileSync("iptables", ["-S"]).toString()).toContain(`-N ${chain}`)
    } finally {
      a.writeOrg(orgA())
      removeLockdownRules(chain)
    }
  })

  it("a request held on one node is listed and approved on another; approve --always is refused on a node (org.toml is the fleet's, not the node's to edit), with the lines to add", async () => {
    const outside = await makeOutsideHost()
    let child: ReturnType<Deployment["spawn"]> | undefined
    try {
      a.writeOrg(`${orgA()}[gateway]\napprovals = "ask"\napproval_wait_s = 60\n`)
      const before = fs.readFileSync(a.file("config", "org.toml"), "utf8")
      const target = `${outside.address}:${outside.port}`
      child = a.spawn(["worker", "run", "alice", askScript(a, "fleet-ask.sh", [`${target} first`], shared)])
      const done = collect(child)
      const held = await nextHeld(a, new Set())
      const always = await a.roster(["approve", held.id, "--always"])
      expect(always.code).not.toBe(0)
      expect(always.stdout + always.stderr).toMatch(/one of a fleet \(\[cluster\]\).*add these lines there:\n[\s\S]*\[\[allow\]\][\s\S]*--run/)
      expect(fs.readFileSync(a.file("config", "org.toml"), "utf8")).toBe(before)
      // Held on node-a, seen and decided on node-b: node-a's gateway takes the decision from the fleet's board.
      const fromB = JSON.parse((await b.roster(["approvals", "--json"])).stdout) as Array<{ id: string; node?: string }>
      expect(fromB.find((x) => x.id === held.id)?.node).toBe("node-a")
      const run = await b.roster(["approve", held.id, "--run"])
      expect(run.code, run.stderr).toBe(0)
      expect(run.stdout).toContain("for the rest of the run")
      // node-b told node-a at once (its runner RPC), rather than leave it to node-a's next look at the board.
      expect(fs.readFileSync(a.file("state", "gateway.log"), "utf8")).toContain("fleet: node node-b decided a request held here; looking at the board now")
      const r = await done
      expect(r.code, r.stderr).toBe(0)
      const runs = path.join(shared, "runs", "alice")
      expect(answersOf(fs.readFileSync(path.join(runs, latestRunId(runs), "stdout.jsonl"), "utf8")).first).toContain(outside.greeting)
    } finally {
      // A failed assertion must not leave the run's box waiting for a decision: the CLI stops it on SIGTERM.
      if (child && child.exitCode === null) {
        child.kill("SIGTERM")
        await new Promise((r) => child?.once("close", r))
      }
      outside.close()
      a.writeOrg(orgA())
    }
  })

  it("a node that stops is marked left, not lost", async () => {
    await b.stop()
    const f = await until(a, (x) => x.nodes.find((n) => n.name === "node-b")?.state === "left")
    expect(f.nodes.find((n) => n.name === "node-a")?.state).toBe("up")
    expect((await a.roster(["server", "status"])).stdout).toMatch(/node-b\s+LEFT/)
  })

  it("a task queued on a node whose daemon is down goes into the fleet's queue (not that machine's files) and runs on a live node", async () => {
    // b was stopped by the test before.
    const added = await b.roster(["task", "add", "alice", "!true"])
    expect(added.code, added.stderr).toBe(0)
    const id = /task (t-[0-9a-f]{8}) queued/.exec(added.stdout)?.[1] ?? ""
    expect(id).not.toBe("")
    expect(fs.existsSync(b.file("data", "tasks", "records", `${id}.json`))).toBe(false)
    expect(added.stderr).toContain("this node's roster server is not running — the task is in the fleet's queue")
    const shown = async (d: Deployment) => JSON.parse((await d.roster(["task", "show", id, "--json"])).stdout) as { status: string; node?: string }
    const by = Date.now() + 30_000
    while ((await shown(a)).status !== "done" && Date.now() < by) await new Promise((r) => setTimeout(r, 300))
    expect(await shown(a)).toMatchObject({ status: "done", node: "node-a" })
    // The stopped node's CLI reads the same queue.
    const listed = JSON.parse((await b.roster(["task", "list", "--json"])).stdout) as Array<{ task_id: string; status: string }>
    expect(listed.find((t) => t.task_id === id)?.status).toBe("done")
  })

  it("a task claimed on a node takes that node's warm box of its worker, handed over under the claim's run id (warm: true)", async () => {
    // b is stopped (the tests before): node-a alone claims, and its org.toml alone turns warm boxes on.
    a.writeOrg(`${orgA()}[box]\nwarm = "recent"\n`)
    // A run of alice leaves her one, when she has none now.
    if ((await warmBoxOf(docker, a.file("config"), "alice", 0)) === "") expect((await a.roster(["worker", "run", "alice", "!true"])).code).toBe(0)
    const warmId = await warmBoxOf(docker, a.file("config"), "alice")
    expect(warmId).not.toBe("")
    const added = await a.roster(["task", "add", "alice", "!true", "--json"])
    expect(added.code, added.stderr).toBe(0)
    const id = (JSON.parse(added.stdout) as { task_id: string }).task_id
    const shown = async () => JSON.parse((await a.roster(["task", "show", id, "--json"])).stdout) as { status: string; node?: string; run_ids: Array<string> }
    const by = Date.now() + 30_000
    while (!["done", "failed"].includes((await shown()).status) && Date.now() < by) await new Promise((r) => setTimeout(r, 300))
    // The box was handed over under the claim's own run id (the one its statement wrote), not the box's.
    const task = await shown()
    expect(task).toMatchObject({ status: "done", node: "node-a", run_ids: [expect.any(String)] })
    expect(task.run_ids[0]).not.toBe(warmId)
    const run = JSON.parse((await a.roster(["runs", "show", task.run_ids[0] ?? "", "--json"])).stdout) as Record<string, unknown>
    expect(run).toMatchObject({ run_id: task.run_ids[0], kind: "task", task_id: id, warm: true, warm_box: warmId, exit_code: 0 })
  })

  it("a claim on another node starts cold: node-b runs alice's task in a box of its own (warm: false) while node-a's warm box of alice stays node-a's, untaken; node-b then makes its own", async () => {
    // Both nodes keep warm boxes; node-a has one slot, held by carol's long task, so node-b claims the next task.
    a.writeOrg(`${orgA()}[box]\nwarm = "recent"\n[supervisor]\nconcurrency = 1\n`)
    b.writeOrg(`${cluster(rpcB)}[box]\nwarm = "recent"\n`)
    await new Promise((r) => setTimeout(r, 1_000))
    if ((await warmBoxOf(docker, a.file("config"), "alice", 0)) === "") expect((await a.roster(["worker", "run", "alice", "!true"])).code).toBe(0)
    const warmId = await warmBoxOf(docker, a.file("config"), "alice")
    expect(warmId).not.toBe("")
    const show = async (d: Deployment, id: string) =>
      JSON.parse((await d.roster(["task", "show", id, "--json"])).stdout) as { status: string; node?: string; run_ids: Array<string> }
    if (!fs.existsSync(a.file("config", "workers", "carol"))) expect((await a.roster(["worker", "add", "carol"])).code).toBe(0)
    const hogAdded = await a.roster(["task", "add", "carol", "!sleep 30", "--json"])
    expect(hogAdded.code, hogAdded.stderr).toBe(0)
    const hog = (JSON.parse(hogAdded.stdout) as { task_id: string }).task_id
    try {
      let by = Date.now() + 20_000
      while ((await show(a, hog)).status !== "running" && Date.now() < by) await new Promise((r) => setTimeout(r, 300))
      expect(await show(a, hog)).toMatchObject({ status: "running", node: "node-a" })
      const started = await b.roster(["server", "start"])
      expect(started.code, started.stdout + started.stderr).toBe(0)
      const added = await b.roster(["task", "add", "alice", "!true", "--json"])
      expect(added.code, added.stderr).toBe(0)
      const id = (JSON.parse(added.stdout) as { task_id: string }).task_id
      by = Date.now() + 30_000
      while (!["done", "failed"].includes((await show(b, id)).status) && Date.now() < by) await new Promise((r) => setTimeout(r, 300))
      const task = await show(b, id)
      expect(task).toMatchObject({ status: "done", node: "node-b" })
      expect(task.run_ids).toHaveLength(1)
      expect(task.run_ids[0]).not.toBe(warmId)
      const run = JSON.parse((await b.roster(["runs", "show", task.run_ids[0] ?? "", "--json"])).stdout) as Record<string, unknown>
      expect(run).toMatchObject({ kind: "task", task_id: id, warm: false, exit_code: 0 })
      // node-a's box of alice was never another node's to take: it is still there, the same box; node-b's next is its own.
      expect(await warmBoxOf(docker, a.file("config"), "alice", 0)).toBe(warmId)
      const own = await warmBoxOf(docker, b.file("config"), "alice")
      expect(own).not.toBe("")
      expect(own).not.toBe(warmId)
    } finally {
      await a.roster(["task", "cancel", hog])
      a.writeOrg(orgA())
      b.writeOrg(cluster(rpcB))
    }
  })
})
