// The gateway's grant path (CONNECT, TLS terminated with a roster leaf, credential injected,
// TLS to the upstream, answer scrubbed) against a direct TLS connection to the same local
// upstream, alternating, in one process. Run through scripts/bench.mjs (npm run bench).
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as https from "node:https"
import type * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, it } from "vitest"
import { layout, Paths } from "../src/config/Paths.js"
import { makeTestTls } from "../test/support/testCa.js"
import { directTls, emit, ms, percentile, quick, rawClient, tunnelTls } from "./support.js"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const TOKEN = "be".repeat(32)
const HOST = "bench.example.test"

describe("gateway", () => {
  let gateway: ChildProcess
  let gatewayPort: number
  let upstreamPort: number
  let upstream: https.Server
  let rosterCa: string
  let upstreamCa: string

  beforeAll(async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "roster-bench-"))
    const tlsFiles = await makeTestTls("127.0.0.1")
    upstreamCa = tlsFiles.caPem
    fs.writeFileSync(path.join(dir, "upstream-ca.crt"), tlsFiles.caPem)
    upstream = https.createServer({ cert: tlsFiles.certPem, key: tlsFiles.keyPem, keepAliveTimeout: 60_000 }, (_req, res) => {
      res.writeHead(200, { "content-type": "text/plain", "content-length": "2" }).end("ok")
    })
    upstream.maxConnections = 10_000
    await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r))
    upstreamPort = (upstream.address() as net.AddressInfo).port

    const paths = { ...Paths.fromEnv({ ROSTER_HOME: dir, HOME: dir }), home: dir }
    fs.mkdirSync(paths.config, { recursive: true })
    fs.writeFileSync(layout(paths).orgToml, [
      "[gateway]", `upstream_ca_file = "${path.join(dir, "upstream-ca.crt")}"`,
      "[[grant]]", `name = "model"`, `hosts = ["${HOST}"]`, `scope = ["org/alice"]`, `credential = "anthropic"`,
      "[[route]]", `host = "${HOST}"`, `upstream = "https://127.0.0.1:${upstreamPort}"`
    ].join("\n"))
    fs.mkdirSync(layout(paths).identityDir, { recursive: true })
    fs.writeFileSync(path.join(layout(paths).identityDir, `${TOKEN}.json`), JSON.stringify({ subject: "org/alice", run_id: "run-bench", worker: "alice", task_id: null }))
    // The gateway in a process of its own, as the daemon runs it: its CPU is not the bench's.
    gateway = spawn(process.execPath, [...(process.env.BENCH_PROFILE ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : []), path.join(root, "bench", "gatewayServer.mjs"), dir], { stdio: ["pipe", "pipe", "inherit"] })
    gatewayPort = await new Promise<number>((resolve, reject) => {
      gateway.stdout?.once("data", (c: Buffer) => resolve(Number(c.toString().trim())))
      gateway.once("exit", (code) => reject(new Error(`the gateway exited ${code}`)))
    })
    rosterCa = fs.readFileSync(layout(paths).caCert, "utf8")
  }, 60_000)

  afterAll(() => {
    gateway?.stdin?.end()
    upstream.close()
  })

  const viaGateway = () => tunnelTls(gatewayPort, TOKEN, HOST, rosterCa).then((s) => rawClient(s, HOST))
  const direct = () => directTls(upstreamPort, upstreamCa).then((s) => rawClient(s, "127.0.0.1"))

  it("keep-alive latency, p50 and p99, alternating blocks", async () => {
    const [g, d] = [await viaGateway(), await direct()]
    const rounds = quick ? 4 : 10
    const per = quick ? 50 : 200
    const times = { g: [] as Array<number>, d: [] as Array<number> }
    for (let i = 0; i < 20; i++) await g.get("/warm").then(() => d.get("/warm"))
    for (let r = 0; r < rounds; r++) {
      for (const [c, into] of [[g, times.g], [d, times.d]] as const) {
        for (let i = 0; i < per; i++) {
          const t = process.hrtime.bigint()
          await c.get("/v1/messages")
          into.push(ms(t))
        }
      }
    }
    g.close()
    d.close()
    for (const p of [50, 99]) {
      const roster = percentile(times.g, p)
      const baseline = percentile(times.d, p)
      const limit = p === 50 ? 1 : 5
      emit({
        metric: `grant path, keep-alive, p${p}`, roster, baseline, unit: "ms", compare: "added",
        goal: `added <= ${limit} ms`, pass: roster - baseline <= limit, spread: `n=${times.g.length}`
      })
    }
  }, 300_000)

  it("throughput with 16 keep-alive connections", async () => {
    const seconds = quick ? 1 : 3
    const load = async (open: () => Promise<ReturnType<typeof rawClient>>) => {
      const clients = await Promise.all(Array.from({ length: 16 }, open))
      let done = 0
      const until = Date.now() + seconds * 1000
      await Promise.all(clients.map(async (c) => {
        while (Date.now() < until) {
          await c.get("/v1/messages")
          done++
        }
      }))
      for (const c of clients) c.close()
      return done / seconds
    }
    const roster = await load(viaGateway)
    const baseline = await load(direct)
    emit({ metric: "grant path, 16 connections", roster, baseline, unit: "req/s", compare: "share", goal: ">= 50 % of direct", pass: roster / baseline >= 0.5 })
  }, 120_000)

  it("a new connection: CONNECT + TLS + one request, against direct TLS + one request", async () => {
    const n = quick ? 20 : 100
    const times = { g: [] as Array<number>, d: [] as Array<number> }
    for (let i = 0; i < n; i++) {
      let t = process.hrtime.bigint()
      const g = await viaGateway()
      await g.get("/v1/messages")
      times.g.push(ms(t))
      g.close()
      t = process.hrtime.bigint()
      const d = await direct()
      await d.get("/v1/messages")
      times.d.push(ms(t))
      d.close()
    }
    const roster = percentile(times.g, 50)
    const baseline = percentile(times.d, 50)
    emit({
      metric: "new connection, p50", roster, baseline, unit: "ms", compare: "ratio", goal: "<= 2x direct",
      pass: roster / baseline <= 2, spread: `p90 ${percentile(times.g, 90).toFixed(1)} vs ${percentile(times.d, 90).toFixed(1)}`
    })
  }, 120_000)
})
