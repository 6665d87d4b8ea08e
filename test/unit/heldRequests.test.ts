import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Option } from "effect"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { OrgConfig } from "../../src/config/OrgConfig.js"
import { layout, Paths } from "../../src/config/Paths.js"
import { Audit, type AuditRecord } from "../../src/gateway/base/Audit.js"
import { Dialer } from "../../src/gateway/base/Dialer.js"
import { LiveRuns } from "../../src/gateway/base/LiveRuns.js"
import { Gateway } from "../../src/gateway/egress/Gateway.js"
import { GatewayLive } from "../../src/gateway/server.js"
import { MemoryStore } from "../../src/memory/MemoryStore.js"
import { RunFence } from "../../src/run/RunFence.js"
import { RunLog } from "../../src/run/RunLog.js"
import { SpendLedger } from "../../src/spend/SpendLedger.js"
import { TaskStore } from "../../src/task/TaskStore.js"
import { Vault } from "../../src/vault/Vault.js"
import { reportPreflight } from "../support/boxClient.js"
import { testEngine, until } from "../support/harness.js"

const ALICE = "a2".repeat(32)
const BOB = "b2".repeat(32)
const RUN_A = "2026-12-01-09-00-00-0000a11e"
const RUN_B = "2026-12-01-09-00-00-0000b0b6"
// TEST-NET-2: a public address no rule allows, so a request to it is held; nothing is ever dialled (no decision lets it through).
const TARGET = "198.51.100.9:443"

/** A CONNECT a box sends and keeps open: its socket, and the gateway's answer once it comes. */
const held = (port: number, token: string) => {
  const socket = net.connect(port, "127.0.0.1")
  socket.write(`CONNECT ${TARGET} HTTP/1.1\r\nHost: ${TARGET}\r\nProxy-Authorization: Basic ${Buffer.from(`${token}:x`).toString("base64")}\r\n\r\n`)
  let said = ""
  socket.on("data", (c: Buffer) => (said += c.toString()))
  socket.on("error", () => undefined)
  const answered = new Promise<string>((resolve) => socket.once("close", () => resolve(said)))
  return { socket, answered, said: () => said }
}


/** A deployment on disk with alice's and bob's tokens, and the services a real gateway runs with. */
const gatewayDeployment = (orgToml: string, ended: Set<string>, audited: Array<AuditRecord>) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "roster-held-"))
  const paths = { ...Paths.fromEnv({ ROSTER_HOME: dir, HOME: dir }), home: dir }
  fs.mkdirSync(paths.config, { recursive: true })
  fs.writeFileSync(layout(paths).orgToml, orgToml)
  fs.mkdirSync(layout(paths).identityDir, { recursive: true })
  for (const [token, run, worker] of [[ALICE, RUN_A, "alice"], [BOB, RUN_B, "bob"]] as const) {
    fs.writeFileSync(path.join(layout(paths).identityDir, `${token}.json`), JSON.stringify({ subject: `org/${worker}`, run_id: run, worker, task_id: null }))
  }
  return Layer.mergeAll(
    OrgConfig.layer, Vault.layerTest({}), Dialer.layer, LiveRuns.layerTest((run) => !ended.has(run)), Audit.layerMemory(audited),
    RunLog.layer, TaskStore.layer, MemoryStore.layer, RunFence.layerNone, SpendLedger.layer
  ).pipe(Layer.provideMerge(testEngine(paths)))
}

describe("a tunnel is never left half-open (real gateway on loopback)", () => {
  it.live("the box ends its side of an [[allow]]ed tunnel and the upstream keeps its own: both close within the bound, and the tunnel is audited", () =>
    Effect.gen(function*() {
      // An upstream that never closes its side (it hears the gateway's end, and keeps its own half open).
      let upstreamClosed = false
      const server = net.createServer({ allowHalfOpen: true }, (s) => {
        s.on("data", () => undefined)
        s.once("end", () => (upstreamClosed = true))
      })
      yield* Effect.acquireRelease(
        Effect.promise(() => new Promise<void>((r) => server.listen(0, "127.0.0.1", r))),
        () => Effect.sync(() => server.close())
      )
      const upPort = (server.address() as net.AddressInfo).port
      const audited: Array<AuditRecord> = []
      const layer = gatewayDeployment([
        "[[allow]]", `hosts = ["tunnel.example.test"]`, `scope = ["org/alice"]`,
        "[[route]]", `host = "tunnel.example.test"`, `upstream = "http://127.0.0.1:${upPort}"`
      ].join("\n"), new Set(), audited)
      yield* Effect.gen(function*() {
        const gateway = Context.get(yield* Layer.build(GatewayLive({ addrs: ["127.0.0.1"], port: 0 })), Gateway)
        const port = gateway.port()
        yield* Effect.promise(() => reportPreflight(port, ALICE))
        const socket = net.connect(port, "127.0.0.1")
        socket.on("error", () => undefined)
        socket.write(`CONNECT tunnel.example.test:443 HTTP/1.1\r\nHost: tunnel.example.test:443\r\nProxy-Authorization: Basic ${Buffer.from(`${ALICE}:x`).toString("base64")}\r\n\r\n`)
        yield* until(Effect.sync(() => socket.bytesRead), (n) => n > 0, "the tunnel is established")
        socket.end("bye")
        yield* until(Effect.sync(() => upstreamClosed), (c) => c, "the gateway ends its side to the upstream")
        // The tunnel ends (its audit line is written only then) although the upstream never closed.
        yield* until(Effect.sync(() => audited.filter((r) => r.host === "tunnel.example.test")), (l) => l.length === 1, "the tunnel's audit line is written")
        expect(audited.find((r) => r.host === "tunnel.example.test")).toMatchObject({ status: 200, run_id: RUN_A, bytes_up: 3 })
      }).pipe(Effect.scoped, Effect.provide(layer))
    }).pipe(Effect.scoped))
})

describe("held requests are bounded and owned (real gateway on loopback)", () => {
  it.live("past approvals_max_per_run a request is refused at once; one whose box closed it, or whose run ended, is gone and cannot be approved", () =>
    Effect.gen(function*() {
      const ended = new Set<string>()
      const audited: Array<AuditRecord> = []
      const layer = gatewayDeployment(`[gateway]\napprovals = "ask"\napproval_wait_s = 120\napprovals_max_per_run = 2\napprovals_max = 3\n`, ended, audited)
      yield* Effect.gen(function*() {
        const gateway = Context.get(yield* Layer.build(GatewayLive({ addrs: ["127.0.0.1"], port: 0 })), Gateway)
        const port = gateway.port()
        for (const token of [ALICE, BOB]) yield* Effect.promise(() => reportPreflight(port, token))
        const list = gateway.approvals.list
        const a1 = held(port, ALICE)
        const a2 = held(port, ALICE)
        yield* until(list, (l) => l.length === 2, "alice's two requests are held")
        // A third of the same run is not held: refused at once, saying why.
        const a3 = held(port, ALICE)
        const third = yield* Effect.promise(() => a3.answered)
        expect(third).toMatch(/^HTTP\/1\.1 429/)
        expect(third).toContain("approvals_max_per_run = 2")
        const b1 = held(port, BOB)
        yield* until(list, (l) => l.length === 3, "bob's request is held beside alice's")
        // The node's cap holds every run's together.
        const b2 = held(port, BOB)
        expect(yield* Effect.promise(() => b2.answered)).toContain("approvals_max = 3")

        // The box closes a held request's connection: it leaves the list, and approving it changes nothing.
        // (Which of alice's two is a1's is the gateway's order of arrival, not the test's: the one that went is it.)
        const before = (yield* list).filter((p) => p.run_id === RUN_A).map((p) => p.id)
        a1.socket.end()
        const after = yield* until(list, (l) => l.filter((p) => p.run_id === RUN_A).length === 1, "a request whose connection closed is gone")
        const gone = before.find((id) => !after.some((p) => p.id === id))
        expect(gone).toBeDefined()
        expect(yield* gateway.approvals.decide(gone!, { decision: "run", by: "a person, too late" })).toEqual(Option.none())
        expect(gateway.approvals.allowedForRun(RUN_A, "198.51.100.9", 443)).toBe(false)

        // Bob's run ends: its held request goes, and the box (if it still listens) hears why.
        ended.add(RUN_B)
        yield* until(list, (l) => !l.some((p) => p.run_id === RUN_B), "a request whose run ended is gone")
        expect(yield* Effect.promise(() => b1.answered)).toMatch(/^HTTP\/1\.1 40[37]/)
        expect((yield* list).map((p) => p.run_id)).toEqual([RUN_A])
        a2.socket.destroy()
        yield* until(list, (l) => l.length === 0, "the last held request goes with its connection")
      }).pipe(Effect.scoped, Effect.provide(layer))
      // Each is audited with how it ended.
      const notes = audited.filter((r) => r.host === "198.51.100.9").map((r) => `${r.status} ${r.note ?? ""}`)
      expect(notes.filter((n) => n.startsWith("429"))).toHaveLength(2)
      expect(notes.some((n) => n.includes("the box closed its connection"))).toBe(true)
      expect(notes.some((n) => n.includes("its run ended"))).toBe(true)
    }))
})
