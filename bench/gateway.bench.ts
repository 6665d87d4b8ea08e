// The gateway's grant path (CONNECT, TLS terminated with a roster leaf, credential injected,
// TLS to the upstream, answer scrubbed) against a direct TLS connection to the same local
// upstream, alternating, in one process. Run through scripts/bench.mjs (npm run bench).
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Effect, Exit, Layer, Scope } from "effect"
import * as fs from "node:fs"
import * as https from "node:https"
import type * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, it } from "vitest"
import { OrgConfig } from "../src/config/OrgConfig.js"
import { layout, Paths } from "../src/config/Paths.js"
import { makeDockerTest } from "../src/docker/DockerTest.js"
import { Files } from "../src/fs/Files.js"
import { Audit } from "../src/gateway/Audit.js"
import { Dialer } from "../src/gateway/Dialer.js"
import { LiveRuns } from "../src/gateway/LiveRuns.js"
import { serveGateway } from "../src/gateway/server.js"
import { HostGit } from "../src/knowledge/HostGit.js"
import { RunLog } from "../src/run/RunLog.js"
import { TaskStore } from "../src/task/TaskStore.js"
import { Vault } from "../src/vault/Vault.js"
import { makeTestTls } from "../test/support/testCa.js"
import { directTls, emit, ms, percentile, quick, rawClient, tunnelTls } from "./support.js"

const TOKEN = "be".repeat(32)
const HOST = "bench.example.test"

describe("gateway", () => {
  let scope: Scope.CloseableScope
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
    const layer = Layer.mergeAll(
      OrgConfig.layer, Vault.layerTest({ anthropic: { type: "api_key", key: "sk-ant-bench-not-real" } }), Dialer.layer,
      LiveRuns.layerTest(() => true), Audit.layer, RunLog.layer, TaskStore.layer
    ).pipe(Layer.provideMerge(Layer.mergeAll(NodeContext.layer, Files.layer, HostGit.layer, Paths.layerAt(paths), makeDockerTest())))
    scope = Effect.runSync(Scope.make())
    gatewayPort = (await Effect.runPromise(serveGateway({ addrs: ["127.0.0.1"], port: 0 }).pipe(Effect.provide(layer), Scope.extend(scope)))).port
    rosterCa = fs.readFileSync(layout(paths).caCert, "utf8")
  }, 60_000)

  afterAll(async () => {
    await Effect.runPromise(Scope.close(scope, Exit.void))
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
