import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Either, Exit, Fiber, Layer, TestClock } from "effect"
import { answerWithin } from "../../src/contract/answerWithin.js"
import { watchInbox } from "../../src/session/inbox.js"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { RunLog } from "../../src/run/RunLog.js"
import { RunIndex } from "../../src/run/RunIndex.js"
import { TaintLog } from "../../src/run/TaintLog.js"
import { isTainted } from "../../src/contract/taint.js"
import { decodeToml } from "../../src/config/decode.js"
import { OrgSchema } from "../../src/config/schema.js"
import type { FleetStatus } from "../../src/contract/fleet.js"
import { fleetLines } from "../../src/cli/serverCommand.js"
import { type FleetCheck, fleetCheckLines } from "../../src/fleet/doctor.js"
import { differingFiles, orgDigest } from "../../src/fleet/fingerprint.js"
import { nodeNameOf } from "../../src/config/nodeName.js"
import { beatEvery, CUT_OFF } from "../../src/fleet/join.js"
import { afterLanded, afterMissed, cutOffAfterMs, fenceAfterS, freshHealth, leaseMarginS } from "../../src/fleet/lease.js"
import { afterLoss } from "../../src/fleet/loss.js"
import { Duration } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { layout, Paths } from "../../src/config/Paths.js"
import { OrgConfig } from "../../src/config/OrgConfig.js"
import { Files } from "../../src/fs/Files.js"
import { MemoryStore } from "../../src/memory/MemoryStore.js"
import { forgetAction, rememberAction } from "../../src/gateway/actions/memoryActions.js"
import { taintedRefs } from "../../src/box/context.js"

const org = (text: string) => Either.getOrThrow(decodeToml(OrgSchema, "org.toml", text))
const CLUSTER = "[cluster]\ndatabase = \"postgres://roster@db.test/roster\"\nshared_data = \"/srv/roster\"\n"

describe("the fleet's config comparison", () => {
  it("org.toml compares by its settings: key order and comments never count, nor [cluster] node and [gateway] port", () => {
    const one = org(`${CLUSTER}node = "a"\n[gateway]\nport = 7300\napprovals = "ask"\n[box]\nmemory = "2g"\ntmp_size = "1g"\n`)
    const two = org(`# a comment\n[box]\ntmp_size = "1g"\nmemory = "2g"\n[gateway]\napprovals = "ask"\nport = 7301\n${CLUSTER}node = "b"\n`)
    expect(orgDigest(one)).toBe(orgDigest(two))
    const three = org(`${CLUSTER}node = "a"\n[gateway]\nport = 7300\napprovals = "off"\n[box]\nmemory = "2g"\ntmp_size = "1g"\n`)
    expect(orgDigest(three)).not.toBe(orgDigest(one))
    expect(orgDigest(org(`${CLUSTER}node_timeout_s = 60\n`))).not.toBe(orgDigest(org(CLUSTER)))
  })

  it("names the files that differ, including a file only one node has", () => {
    expect(differingFiles({ "org.toml": "1", "workers/a/identity.md": "2" }, { "org.toml": "1", "workers/a/identity.md": "3", "workers/b/identity.md": "4" }))
      .toEqual(["workers/a/identity.md", "workers/b/identity.md"])
    expect(differingFiles({ "org.toml": "1" }, { "org.toml": "1" })).toEqual([])
  })
})

describe("a fleet node's folders", () => {
  it("[cluster] puts what a worker carries between nodes in the shared folder and each node's audit log there; the rest stays the machine's", () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "roster-fleet-paths-"))
    try {
      fs.mkdirSync(path.join(root, "config"))
      fs.writeFileSync(path.join(root, "config", "org.toml"), `${CLUSTER}node = "from-file"\n[box]\nmemory = "2g"\n`)
      const paths = Paths.fromEnv({ ROSTER_HOME: root, HOME: root, ROSTER_NODE: "n7" })
      expect(paths.fleet).toEqual({ node: "n7", shared: "/srv/roster" })
      const l = layout(paths)
      expect(l.runDir("alice", "2026-12-02-00-00-00-00000001")).toBe("/srv/roster/runs/alice/2026-12-02-00-00-00-00000001")
      expect([l.storeDir("alice"), l.contextFile("alice", "r"), l.runReposDir("alice", "r"), l.channelDir("c"), l.inboxFile("r")].every((f) => f.startsWith("/srv/roster/"))).toBe(true)
      expect(l.auditDir).toBe("/srv/roster/audit/n7")
      expect(l.nodeAuditDir("n2")).toBe("/srv/roster/audit/n2")
      expect([l.vaultDir, l.identityDir, l.caDir, l.memoryFile("alice")].some((f) => f.startsWith("/srv/roster"))).toBe(false)
      // No [cluster] (or an org.toml that does not parse): one machine's folders.
      fs.writeFileSync(path.join(root, "config", "org.toml"), "[box]\nmemory = \"2g\"\n")
      expect(Paths.fromEnv({ ROSTER_HOME: root, HOME: root }).fleet).toBeUndefined()
      fs.writeFileSync(path.join(root, "config", "org.toml"), "[cluster\n")
      expect(layout(Paths.fromEnv({ ROSTER_HOME: root, HOME: root })).runsDir).toBe(path.join(root, "data", "runs"))
    } finally {
      fs.rmSync(root, { recursive: true, force: true })
    }
  })
})

describe("a node's name and beat", () => {
  const cluster = org(`${CLUSTER}node = "from-file"\n`).cluster!
  it("ROSTER_NODE, else [cluster] node, else the host name made valid", () => {
    expect(nodeNameOf(cluster, { ROSTER_NODE: "from-env" })).toBe("from-env")
    expect(nodeNameOf(cluster, {})).toBe("from-file")
    expect(nodeNameOf(cluster, { ROSTER_NODE: "has space" })).toEqual({ invalid: "ROSTER_NODE=has space" })
    const host = nodeNameOf(org(CLUSTER).cluster!, {})
    expect(typeof host === "string" && /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/.test(host)).toBe(true)
  })

  it("beats six times a timeout, at most every 5 s and at least every 1 s", () => {
    expect(Duration.toSeconds(beatEvery({ ...cluster, node_timeout_s: 30 }))).toBe(5)
    expect(Duration.toSeconds(beatEvery({ ...cluster, node_timeout_s: 12 }))).toBe(2)
    expect(Duration.toSeconds(beatEvery({ ...cluster, node_timeout_s: 5 }))).toBe(1)
    expect(Duration.toSeconds(beatEvery({ ...cluster, node_timeout_s: 600 }))).toBe(5)
  })

  it("the lease: a node stops acting two beats before its timeout, the fleet fences it two beats after — never overlapping", () => {
    for (const node_timeout_s of [5, 6, 12, 30, 600]) {
      const c = { ...cluster, node_timeout_s }
      const margin = leaseMarginS(c)
      expect(margin).toBe(2 * Duration.toSeconds(beatEvery(c)))
      expect(cutOffAfterMs(c)).toBe((node_timeout_s - margin) * 1000)
      expect(fenceAfterS(c)).toBe(node_timeout_s + margin)
      // The gap: at least four beats between the node stopping and the fleet re-running its tasks.
      expect(fenceAfterS(c) * 1000 - cutOffAfterMs(c)).toBeGreaterThanOrEqual(4 * Duration.toMillis(beatEvery(c)))
      expect(cutOffAfterMs(c)).toBeGreaterThan(0)
    }
  })

  it("a node cuts itself off once no beat has landed for timeout − margin, unless it was frozen itself; a beat that lands ends it", () => {
    const c = { ...cluster, node_timeout_s: 5 } // beats every 1 s: cut off after 3 s, fenced after 7 s
    const t0 = 1_000_000
    let h = freshHealth(t0)
    // Misses one beat a second: reachable goes false at once, the cut-off comes at 3 s.
    h = afterMissed(h, "no answer within 1s", t0 + 1000, c)
    expect([h.reachable, h.cutOff]).toEqual([false, false])
    h = afterMissed(h, "no answer within 1s", t0 + 2000, c)
    expect(h.cutOff).toBe(false)
    h = afterMissed(h, "no answer within 1s", t0 + 3000, c)
    expect(h.cutOff).toBe(true)
    // It stays cut off while the beats miss, and a beat that lands ends it (not fenced: nobody could fence it yet).
    h = afterMissed(h, "no answer within 1s", t0 + 4000, c)
    expect(h.cutOff).toBe(true)
    h = afterLanded(h, "ok", t0 + 5000)
    expect([h.reachable, h.cutOff, h.fenced, h.since]).toEqual([true, false, false, t0 + 5000])
    // A process frozen (SIGSTOP) for 10 s: its first try after waking missing does not cut it off —
    // the next, tried at once, decides (and finds the fence if the fleet set one).
    const frozen = afterMissed(freshHealth(t0), "no answer within 1s", t0 + 10_000, c)
    expect(frozen.cutOff).toBe(false)
    expect(afterMissed(frozen, "no answer within 1s", t0 + 11_000, c).cutOff).toBe(true)
    expect(afterLanded(frozen, "fenced", t0 + 10_500)).toMatchObject({ fenced: true, cutOff: false, reachable: true })
  })

  it.effect("a beat whose statement hangs, and whose cancelling hangs too, is given up at its interval (the database's packets dropped)", () =>
    Effect.gen(function*() {
      // What @effect/sql-pg does on interruption: it asks the database to cancel over a new
      // connection, which waits as long as the first (up to 5 s) when its packets are dropped.
      const hung = Effect.never.pipe(Effect.onInterrupt(() => Effect.sleep("5 seconds")))
      const beat = yield* hung.pipe(answerWithin("1 second", () => "no answer within 1s"), Effect.either, Effect.fork)
      yield* TestClock.adjust("1 second")
      const got = yield* Fiber.poll(beat)
      expect(got._tag === "Some" ? got.value : "still waiting").toEqual(Exit.succeed(Either.left("no answer within 1s")))
      // A plain timeout is what waited: the same statement still running at 1 s.
      const plain = yield* hung.pipe(Effect.timeoutFail({ duration: "1 second", onTimeout: () => "late" }), Effect.either, Effect.fork)
      yield* TestClock.adjust("1 second")
      expect((yield* Fiber.poll(plain))._tag).toBe("None")
      yield* TestClock.adjust("5 seconds")
    }))
})

const node = (name: string, over: Partial<FleetStatus["nodes"][number]> = {}): FleetStatus["nodes"][number] => ({
  name, host: "h", pid: 1, version: "0.1.0", state: "up", heartbeat_age_s: 1.5, boxes: 1, concurrency: 2, load: 0.5, skew_ms: 3, config_differs: [], ...over
})

describe("what a lost node's running task becomes", () => {
  const base = {
    task_id: "t-0000000a", worker: "alice", prompt: "p", status: "running" as const, seq: 1, ceiling_min: null, after: null,
    origin: { by: "person" as const, run_id: null, task_id: null }, created_at: "x", updated_at: "x", started_at: "x", finished_at: null,
    run_ids: ["2026-12-02-00-00-00-00000001"], ended_by: null, exit_code: null, reason: null, node: "lost-one", attempt: 1
  }
  const NOW = "2026-12-02T10:00:00.000Z"

  it("retry: its first loss queues it again, with no node, the lost attempt recorded with who fenced it", () => {
    const t = afterLoss(base, "lost-one", "b", "retry", NOW)
    expect(t).toMatchObject({ status: "queued", started_at: null, finished_at: null })
    expect(t.node).toBeUndefined()
    expect(t.lost).toEqual([{ node: "lost-one", attempt: 1, run_id: "2026-12-02-00-00-00-00000001", at: NOW, by: "b" }])
    expect(t.reason).toContain("node lost-one was lost while it ran attempt 1 (run 2026-12-02-00-00-00-00000001); queued again")
  })

  it("a second loss fails it, handed to the fencing node (which delivers its answer); on_node_loss = fail fails the first", () => {
    const again = afterLoss({ ...afterLoss(base, "lost-one", "b", "retry", NOW), status: "running", node: "c", attempt: 2 }, "c", "b", "retry", NOW)
    expect(again).toMatchObject({ status: "failed", node: "b", ended_by: "fenced", finished_at: NOW })
    expect(again.lost?.map((l) => l.attempt)).toEqual([1, 2])
    expect(again.reason).toContain("it had been re-run once already")
    const fail = afterLoss(base, "lost-one", "b", "fail", NOW)
    expect(fail).toMatchObject({ status: "failed", node: "b" })
    expect(fail.reason).toContain(`[cluster] on_node_loss is "fail" — queue it again: roster task add`)
  })

  it("a cancel asked of it wins over a retry", () => {
    const t = afterLoss({ ...base, cancel_requested: { at: NOW, on_node: "b" } }, "lost-one", "b", "retry", NOW)
    expect(t).toMatchObject({ status: "cancelled", finished_at: NOW })
  })
})

describe("server status's fleet lines", () => {
  it("a line a node, lost and left in capitals, this node marked, another version named, config drift with the fix", () => {
    const lines = fleetLines({
      node: "a", database: "db.test:5432/roster", reachable: true, detail: null, schema: 1,
      nodes: [node("a"), node("bb", { state: "lost", heartbeat_age_s: 45, config_differs: ["org.toml"], version: "0.2.0" }), node("c", { state: "left", config_differs: ["x"] })]
    })
    const fenced = fleetLines({ node: "a", database: "db.test", reachable: true, detail: null, schema: 3, nodes: [node("a"), node("d", { state: "lost", fenced_by: "a" })] })
    expect(fenced[2]).toMatch(/^ {2}d {2}LOST .* fenced by a: its tasks went back to the queue$/)
    expect(lines[0]).toBe("fleet: node a, 1 of 3 nodes up (database db.test:5432/roster, schema 1)")
    expect(lines[1]).toBe("  a   up    beat 1.5s ago  1/2 boxes  load 0.5  clock +3 ms  (this node)")
    expect(lines[2]).toMatch(/^ {2}bb  LOST  beat 45s ago .* version 0\.2\.0$/)
    expect(lines[3]).toMatch(/^ {2}c {3}LEFT/)
    // A node that left cleanly is not drift to act on.
    expect(lines.slice(4)).toEqual(["  bb's config differs from this node's: org.toml — every node holds the same files (only [cluster] node and [gateway] port differ)"])
  })

  it("an unreachable database: what is wrong and that the node retries, then that it cut itself off", () => {
    const down = { node: "a", database: "db.test:5432/roster", reachable: false, detail: "connection refused", schema: 1, nodes: [] }
    expect(fleetLines(down)[1]).toBe(
      "  the database does not answer (connection refused): this node retries at every heartbeat, and stops its boxes before its lease could expire"
    )
    const cut = fleetLines({ ...down, cut_off: CUT_OFF })
    expect(cut[1]).toMatch(/^ {2}cut off from the fleet's database: my boxes are stopped/)
    expect(cut[2]).toBe("  the database does not answer (connection refused)")
  })
})

describe("doctor's fleet lines", () => {
  const check = (over: Partial<FleetCheck>): FleetCheck => ({
    node: "a", database: "db.test:5432/roster", connected: true, problem: null, schema: { found: 1, known: 1 },
    shared_data: { folder: "/srv/roster", ok: true, fleet: "fleet-1", detail: null }, skew_ms: 4,
    nodes: [node("a", { heartbeat_age_s: 1, skew_ms: 4 })], ...over
  })

  it("a database it cannot reach says why and the fix, and nothing more", () => {
    expect(fleetCheckLines(check({ connected: false, problem: "the fleet's database db.test:5432/roster: connection refused — start Postgres there" })))
      .toEqual(["fleet: node a, database db.test:5432/roster — CANNOT CONNECT: the fleet's database db.test:5432/roster: connection refused — start Postgres there"])
  })

  it("schema: none yet, older (migrated at start), newer (upgrade this node)", () => {
    expect(fleetCheckLines(check({ schema: { found: 0, known: 1 } })).join("\n")).toContain("none yet (the first daemon to start creates it")
    expect(fleetCheckLines(check({ schema: { found: 1, known: 2 } })).join("\n")).toContain("1 (this roster migrates it to 2 when its daemon starts)")
    expect(fleetCheckLines(check({ schema: { found: 3, known: 2 } })).join("\n")).toContain("3, NEWER than this roster's 2: another node runs a newer roster — upgrade this one")
  })

  it("clock skew past 2 s, here or on a node, is named with the fix; within it, no warning", () => {
    expect(fleetCheckLines(check({})).join("\n")).not.toContain("CLOCK SKEW")
    const far = fleetCheckLines(check({ nodes: [node("b", { heartbeat_age_s: 1, skew_ms: -2500 })] })).join("\n")
    expect(far).toContain("CLOCK SKEW over 2 s (b): node timeouts and the budgets' days go by the clock — run NTP")
    expect(fleetCheckLines(check({ skew_ms: 3000 })).join("\n")).toContain("CLOCK SKEW over 2 s (this machine)")
  })

  it("a shared folder that is not the fleet's says so", () => {
    const lines = fleetCheckLines(check({ shared_data: { folder: "/srv/roster", ok: false, fleet: null, detail: "holds no .roster-fleet.json" } }))
    expect(lines).toContain("  shared data: /srv/roster — PROBLEM: holds no .roster-fleet.json")
  })
})

describe("a fleet run's events", () => {
  it("each node appends to its own file of the run; every node reads them all — a taint on the run's node, an untaint on another", async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "roster-fleet-events-"))
    try {
      const shared = path.join(root, "shared")
      const nodeLog = (node: string) => {
        const home = path.join(root, node)
        fs.mkdirSync(path.join(home, "config"), { recursive: true })
        fs.writeFileSync(path.join(home, "config", "org.toml"), `[cluster]\ndatabase = "postgres://roster@db.test/roster"\nshared_data = "${shared}"\nnode = "${node}"\n`)
        const paths = Paths.fromEnv({ ROSTER_HOME: home, HOME: home })
        expect(paths.fleet?.node).toBe(node)
        return <A, E>(f: (log: Context.Tag.Service<RunLog>) => Effect.Effect<A, E>) =>
          Effect.runPromise(Effect.flatMap(RunLog, f).pipe(Effect.provide(RunLog.layer.pipe(Layer.provide(Layer.mergeAll(Paths.layerAt(paths), NodeContext.layer))))))
      }
      const [n1, n2] = [nodeLog("n1"), nodeLog("n2")]
      const runId = "2026-12-02-10-00-00-0000e1e1"
      await n1((log) => log.start({ runId, worker: "alice", kind: "box" }))
      const taint = (time: string) => ({ kind: "taint" as const, taint: { reason: "egress_refused" as const, host: "x.example.com", time } })
      await n1((log) => log.append("alice", runId, taint("2026-12-02T10:00:01.000Z")))
      await n2((log) => log.append("alice", runId, { kind: "untaint", untaint: { reason: "looked", at: "2026-12-02T10:00:02.000Z", cleared: 1, landed: [] } }))
      const runDir = path.join(shared, "runs", "alice", runId)
      // No file has two writers: the run's node wrote its own, the untainting node its own.
      expect(fs.readdirSync(runDir).filter((f) => f.startsWith("events")).sort()).toEqual(["events.n1.jsonl", "events.n2.jsonl"])
      for (const read of [n1, n2]) {
        const run = await read((log) => log.read("alice", runId))
        expect(run?.node).toBe("n1")
        expect(run?.tainted).toHaveLength(1)
        expect(run && isTainted(run)).toBe(false)
      }
      // A later taint taints it again, on every node; of two untaints the later one counts, whichever node's file it is in.
      await n1((log) => log.append("alice", runId, taint("2026-12-02T10:00:03.000Z")))
      await n2((log) => log.append("alice", runId, { kind: "untaint", untaint: { reason: "late", at: "2026-12-02T10:00:05.000Z", cleared: 2, landed: [] } }))
      await n1((log) => log.append("alice", runId, { kind: "untaint", untaint: { reason: "early", at: "2026-12-02T10:00:04.000Z", cleared: 1, landed: [] } }))
      const run = await n2((log) => log.read("alice", runId))
      expect(run?.untainted?.reason).toBe("late")
      expect(run && isTainted(run)).toBe(false)
    } finally {
      fs.rmSync(root, { recursive: true, force: true })
    }
  })
})

describe("a fleet session's inbox", () => {
  it("each node delivers into its own file; the session hears every line once, a torn one when it is whole", async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "roster-fleet-inbox-"))
    try {
      const shared = path.join(root, "shared")
      fs.mkdirSync(path.join(root, "config"), { recursive: true })
      fs.writeFileSync(path.join(root, "config", "org.toml"), `[cluster]\ndatabase = "postgres://roster@db.test/roster"\nshared_data = "${shared}"\nnode = "n1"\n`)
      const paths = Paths.fromEnv({ ROSTER_HOME: root, HOME: root })
      const runId = "2026-12-02-10-00-00-0000abcd"
      // The delivering node's file is its own.
      expect(path.basename(layout(paths).inboxFile(runId))).toBe(`${runId}.n1.jsonl`)
      const dir = layout(paths).inboxDir
      fs.mkdirSync(dir, { recursive: true })
      const line = (id: string, node: string) => `${JSON.stringify({ id, from_task: `t-${id}`, worker: node, status: "done", text: `from ${node}`, at: "2026-12-02T10:00:00.000Z" })}\n`
      fs.writeFileSync(path.join(dir, `${runId}.n1.jsonl`), line("a", "n1"))
      fs.writeFileSync(path.join(dir, `${runId}.n2.jsonl`), line("b", "n2") + line("c", "n2").slice(0, 20))
      // Another session's file is not this one's.
      fs.writeFileSync(path.join(dir, "2026-12-02-10-00-00-0000ffff.n2.jsonl"), line("z", "n2"))
      const heard: Array<string> = []
      const watch = watchInbox(runId, (m) => Effect.sync(() => heard.push(m.messageId)))
      await Effect.runPromise(Effect.gen(function*() {
        const fiber = yield* Effect.fork(watch)
        yield* Effect.sleep("200 millis")
        expect([...heard].sort()).toEqual(["a", "b"])
        fs.writeFileSync(path.join(dir, `${runId}.n2.jsonl`), line("b", "n2") + line("c", "n2"))
        fs.appendFileSync(path.join(dir, `${runId}.n1.jsonl`), line("a", "n1"))
        yield* Effect.sleep("700 millis")
        yield* Fiber.interrupt(fiber)
      }).pipe(Effect.provide(Layer.mergeAll(Paths.layerAt(paths), NodeContext.layer))))
      expect([...heard].sort()).toEqual(["a", "b", "c"])
    } finally {
      fs.rmSync(root, { recursive: true, force: true })
    }
  })

  it("with the fleet's taint log, a node's taints and untaints go there, not to its file; one it cannot take is kept in its file; a decision (knowledge_push's, remember's, forget's) is refused while the log is silent", async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "roster-fleet-taints-"))
    try {
      const home = path.join(root, "n1")
      fs.mkdirSync(path.join(home, "config"), { recursive: true })
      fs.writeFileSync(path.join(home, "config", "org.toml"), `[cluster]\ndatabase = "postgres://roster@db.test/roster"\nshared_data = "${path.join(root, "shared")}"\nnode = "n1"\n`)
      const paths = Paths.fromEnv({ ROSTER_HOME: home, HOME: home })
      const down = { value: false }
      const base = Layer.mergeAll(Paths.layerAt(paths), NodeContext.layer, Files.layer)
      const layer = Layer.mergeAll(RunLog.layerIndexed.pipe(Layer.provide(Layer.mergeAll(RunIndex.layerNone, TaintLog.layerTest(down)))), OrgConfig.layer, MemoryStore.layer).pipe(
        Layer.provideMerge(base)
      )
      const runId = "2026-12-02-11-00-00-0000e2e2"
      const seen = await Effect.runPromise(Effect.gen(function*() {
        const log = yield* RunLog
        yield* log.start({ runId, worker: "alice", kind: "box" })
        yield* log.append("alice", runId, { kind: "taint", taint: { reason: "egress_refused", host: "x.example.com", time: "2026-12-02T11:00:01.000Z" } })
        const events = path.join(layout(paths).runDir("alice", runId), "events.n1.jsonl")
        const fileAfterTaint = fs.existsSync(events)
        const tainted = yield* log.readForDecision("alice", runId)
        down.value = true
        yield* log.append("alice", runId, { kind: "untaint", untaint: { reason: "kept here", at: "2026-12-02T11:00:02.000Z", cleared: 1, landed: [] } })
        const decision = yield* Effect.either(log.readForDecision("alice", runId))
        // What rests on the run's taints waits for the log: a memory entry's review, a tainted run's forget.
        const caller = { subject: "org/alice", runId, worker: "alice", taskId: null }
        const remembered = yield* rememberAction(caller, JSON.stringify({ text: "a fact" }))
        const forgot = yield* forgetAction(caller, JSON.stringify({ id: "m-00000000" }))
        // The next run's briefing holds the run's quarantined work back as if tainted.
        const briefedDown = yield* taintedRefs("alice", [`refs/quarantine/run-${runId}`])
        const shown = yield* log.read("alice", runId)
        down.value = false
        const after = yield* log.readForDecision("alice", runId)
        const briefedUp = yield* taintedRefs("alice", [`refs/quarantine/run-${runId}`])
        return { fileAfterTaint, tainted, decision, remembered: remembered.status, forgot: forgot.status, briefedDown: [...briefedDown.values()], briefedUp: [...briefedUp.values()], shown, after, file: fs.readFileSync(events, "utf8") }
      }).pipe(Effect.provide(layer)))
      expect(seen.fileAfterTaint).toBe(false)
      expect(seen.tainted && isTainted(seen.tainted)).toBe(true)
      expect(seen.file).toContain("kept here")
      expect(Either.isLeft(seen.decision) && seen.decision.left.message).toContain("the fleet's taint log did not answer")
      expect([seen.remembered, seen.forgot]).toEqual([503, 503])
      expect(seen.briefedDown).toEqual(["whether its run was tainted could not be read just now"])
      // Back: the untaint kept in the file cleared the log's one taint, so its work is briefed as not landed yet.
      expect(seen.briefedUp).toEqual([])
      // Shown without the log (said in a warning): the file's untaint, not the log's taint.
      expect(seen.shown?.untainted?.reason).toBe("kept here")
      expect(seen.after?.tainted).toHaveLength(1)
      expect(seen.after && isTainted(seen.after)).toBe(false)
    } finally {
      fs.rmSync(root, { recursive: true, force: true })
    }
  })
})
