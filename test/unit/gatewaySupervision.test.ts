import { MemoryStore } from "../../src/memory/MemoryStore.js"
import { testEngine } from "../support/harness.js"
import { makeDockerTest } from "../../src/docker/DockerTest.js"
import { SpendLedger } from "../../src/spend/SpendLedger.js"
import { RunFence } from "../../src/run/RunFence.js"
import { RunLog } from "../../src/run/RunLog.js"
import { TaskStore } from "../../src/task/TaskStore.js"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Logger, TestClock } from "effect"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { OrgConfig } from "../../src/config/OrgConfig.js"
import { SENTINEL } from "../../src/contract/constants.js"
import { layout, Paths } from "../../src/config/Paths.js"
import { Files } from "../../src/fs/Files.js"
import { Audit, type AuditRecord } from "../../src/gateway/base/Audit.js"
import { AuditIndex, type AuditStart } from "../../src/run/AuditIndex.js"
import { Dialer } from "../../src/gateway/base/Dialer.js"
import { LiveRuns } from "../../src/gateway/base/LiveRuns.js"
import { serveGateway } from "../../src/gateway/server.js"
import { Vault } from "../../src/vault/Vault.js"
import { reportPreflight, viaGateway } from "../support/boxClient.js"

const ALICE = "a1".repeat(32)

/** A plain local upstream the grant's [[route]] points at: says whether the real key arrived. */
const upstream = () =>
  new Promise<{ port: number; close: () => void }>((resolve) => {
    const server = http.createServer((req, res) => res.end(`injected=${String(req.headers["x-api-key"] === "sk-real")}`))
    server.listen(0, "127.0.0.1", () => resolve({ port: (server.address() as { port: number }).port, close: () => server.close() }))
  })

describe("a supervised gateway (real listener on loopback)", () => {
  it.live("a defect in the injecting handler is logged and audited as 500, and the next request is served", () =>
    Effect.gen(function*() {
      const up = yield* Effect.promise(upstream)
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "roster-supervise-"))
      const paths = { ...Paths.fromEnv({ ROSTER_HOME: dir, HOME: dir }), home: dir }
      fs.mkdirSync(paths.config, { recursive: true })
      fs.writeFileSync(layout(paths).orgToml, [
        "[[grant]]", `name = "model"`, `hosts = ["api.example.com"]`, `scope = ["org/alice"]`, `credential = "anthropic"`,
        "[[route]]", `host = "api.example.com"`, `upstream = "http://127.0.0.1:${up.port}"`
      ].join("\n"))
      fs.mkdirSync(layout(paths).identityDir, { recursive: true })
      fs.writeFileSync(path.join(layout(paths).identityDir, `${ALICE}.json`), JSON.stringify({ subject: "org/alice", run_id: "2026-12-01-09-00-00-0000a11c", worker: "alice", task_id: null }))

      // The credential path breaks once (a bug, not a refusal), then works.
      let gets = 0
      const flakyVault = Layer.succeed(Vault, {
        get: () => (++gets === 1 ? Effect.die(new Error("vault exploded")) : Effect.succeed({ type: "api_key", key: "sk-real" })),
        put: () => Effect.void,
        remove: () => Effect.succeed(false),
        list: Effect.succeed([])
      })
      const audited: Array<AuditRecord> = []
      const logged: Array<string> = []
      const logger = Logger.make(({ cause, message }) => void logged.push(`${String(message)} ${cause._tag === "Empty" ? "" : String(cause)}`))
      const layer = Layer.mergeAll(OrgConfig.layer, flakyVault, Dialer.layer, LiveRuns.layerTest(() => true), Audit.layerMemory(audited), RunLog.layer, TaskStore.layer, MemoryStore.layer, RunFence.layerNone, SpendLedger.layer).pipe(
        Layer.provideMerge(testEngine(paths))
      )
      yield* Effect.gen(function*() {
        const { port } = yield* serveGateway({ addrs: ["127.0.0.1"], port: 0 })
        yield* Effect.promise(() => reportPreflight(port, ALICE))
        const ca = [fs.readFileSync(layout(paths).caCert, "utf8")]
        const first = yield* Effect.promise(() => viaGateway(port, ALICE, "api.example.com:443", { path: "/v1/messages?beta=true", headers: { "x-api-key": SENTINEL } }, ca))
        expect(first.status).toBe(500)
        const second = yield* Effect.promise(() => viaGateway(port, ALICE, "api.example.com:443", { path: "/v1/messages", headers: { "x-api-key": SENTINEL } }, ca))
        expect(second.status).toBe(200)
        expect(second.body).toBe("injected=true")
      }).pipe(Effect.scoped, Effect.provide(layer), Effect.provide(Logger.replace(Logger.defaultLogger, logger)))

      const failed = audited.find((r) => r.status === 500)
      expect(failed).toMatchObject({ run_id: "2026-12-01-09-00-00-0000a11c", subject: "org/alice", host: "api.example.com", path: "/v1/messages", method: "GET" })
      expect(audited.some((r) => r.status === 200 && r.injected)).toBe(true)
      expect(logged.some((l) => l.includes("unexpected failure") && l.includes("api.example.com") && l.includes("2026-12-01-09-00-00-0000a11c") && l.includes("vault exploded"))).toBe(true)
      // The grant was being decided as the tunnel opened, in the background: the defect is logged there too, never swallowed.
      expect(logged.some((l) => l.includes("deciding the grant of api.example.com:443") && l.includes("as its tunnel opened") && l.includes("vault exploded"))).toBe(true)
      up.close()
    }))

  it.live("a defect in the gateway's background work (a failed preflight's box kill) is logged, never lost with its fiber", () =>
    Effect.gen(function*() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "roster-background-"))
      const paths = { ...Paths.fromEnv({ ROSTER_HOME: dir, HOME: dir }), home: dir }
      fs.mkdirSync(layout(paths).identityDir, { recursive: true })
      fs.writeFileSync(path.join(layout(paths).identityDir, `${ALICE}.json`), JSON.stringify({ subject: "org/alice", run_id: "2026-12-01-09-00-00-0000a11c", worker: "alice", task_id: null }))
      const logged: Array<string> = []
      const logger = Logger.make(({ cause, message }) => void logged.push(`${String(message)} ${cause._tag === "Empty" ? "" : String(cause)}`))
      // The engine breaks (a bug, not an engine error) when the gateway lists the run's boxes to kill them.
      const docker = makeDockerTest({ before: (op) => (op === "containerList" ? Effect.die(new Error("engine exploded")) : Effect.void) })
      const layer = Layer.mergeAll(OrgConfig.layer, Vault.layerTest({}), Dialer.layer, LiveRuns.layerTest(() => true), Audit.layerMemory([]), RunLog.layer, TaskStore.layer, MemoryStore.layer, RunFence.layerNone, SpendLedger.layer).pipe(
        Layer.provideMerge(testEngine(paths, docker))
      )
      yield* Effect.gen(function*() {
        const { port } = yield* serveGateway({ addrs: ["127.0.0.1"], port: 0 })
        yield* Effect.promise(() => reportPreflight(port, ALICE, { ok: false, check: "egress", detail: "test: the box reached out" }))
        for (let i = 0; i < 100 && !logged.some((l) => l.includes("background work")); i++) yield* Effect.sleep("20 millis")
      }).pipe(Effect.scoped, Effect.provide(layer), Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
      expect(logged.some((l) => l.includes("its preflight failed"))).toBe(true)
      expect(logged.some((l) => l.includes("unexpected failure in background work") && l.includes("engine exploded"))).toBe(true)
    }))

  it.effect("a pass of the audit index's loop that dies of a bug is logged, and the next pass still comes", () =>
    Effect.gen(function*() {
      const logged: Array<string> = []
      const logger = Logger.make(({ cause, message }) => void logged.push(`${String(message)} ${cause._tag === "Empty" ? "" : String(cause)}`))
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "roster-audit-index-"))
      const paths = { ...Paths.fromEnv({ ROSTER_HOME: dir, HOME: dir }), home: dir, fleet: { node: "n1", shared: path.join(dir, "shared") } }
      const puts: Array<ReadonlyArray<AuditStart>> = []
      const index = Layer.succeed(AuditIndex, {
        put: (starts) => (puts.push(starts) === 1 ? Effect.die(new Error("index exploded")) : Effect.void),
        of: () => Effect.succeedNone
      })
      const record = (run_id: string): AuditRecord => ({ run_id, subject: "org/alice", host: "h", port: 443, method: "GET", path: "/", status: 200, injected: false, bytes_up: 0, bytes_down: 0, duration_ms: 1 })
      yield* Effect.gen(function*() {
        const audit = yield* Audit
        yield* audit.write(record("2026-12-01-09-00-00-0000a11c"))
        yield* TestClock.adjust("5 seconds")
        expect(puts).toHaveLength(1)
        expect(logged.some((l) => l.includes("unexpected failure noting audit offsets") && l.includes("index exploded"))).toBe(true)
        yield* audit.write(record("2026-12-01-09-00-00-00000b0b"))
        yield* TestClock.adjust("5 seconds")
        expect(puts.map((p) => p.map((s) => s.run_id))).toEqual([["2026-12-01-09-00-00-0000a11c"], ["2026-12-01-09-00-00-00000b0b"]])
      }).pipe(
        Effect.scoped,
        Effect.provide(Audit.layerIndexed.pipe(Layer.provideMerge(Layer.mergeAll(NodeContext.layer, Files.layer, Paths.layerAt(paths), index)))),
        Effect.provide(Logger.replace(Logger.defaultLogger, logger))
      )
    }))

  it.effect("a failing audit log is reported once a minute, never once a request, and never fails the request", () =>
    Effect.gen(function*() {
      const logged: Array<string> = []
      const logger = Logger.make(({ message }) => void logged.push(String(message)))
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "roster-audit-"))
      const paths = { ...Paths.fromEnv({ ROSTER_HOME: dir, HOME: dir }), home: dir }
      // The audit folder's place is taken by a file: every write fails.
      fs.mkdirSync(paths.state, { recursive: true })
      fs.writeFileSync(path.join(paths.state, "audit"), "not a folder")
      const record: AuditRecord = { run_id: null, subject: "org", host: "h", port: 443, method: "GET", path: "/", status: 200, injected: false, bytes_up: 0, bytes_down: 0, duration_ms: 1 }
      yield* Effect.gen(function*() {
        const audit = yield* Audit
        for (let i = 0; i < 5; i++) yield* audit.write(record)
        expect(logged.filter((l) => l.includes("audit log cannot be written"))).toHaveLength(1)
        const { TestClock } = yield* Effect.promise(() => import("effect"))
        yield* TestClock.adjust("61 seconds")
        yield* audit.write(record)
        expect(logged.filter((l) => l.includes("audit log cannot be written"))).toHaveLength(2)
      }).pipe(
        Effect.provide(Audit.layer.pipe(Layer.provideMerge(Layer.mergeAll(NodeContext.layer, Files.layer, Paths.layerAt(paths))))),
        Effect.provide(Logger.replace(Logger.defaultLogger, logger))
      )
    }))
})
