import * as NodeContext from "@effect/platform-node/NodeContext"
import { PgClient } from "@effect/sql-pg"
import { ConfigProvider, Context, Deferred, Effect, Either, Exit, Fiber, Layer, Option, Redacted, Schedule, Stream } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { ClusterSection } from "../../src/config/cluster.js"
import { decodeToml } from "../../src/config/decode.js"
import { Paths } from "../../src/config/Paths.js"
import { OrgSchema } from "../../src/config/schema.js"
import { fleetSqlLayer } from "../../src/fleet/connect.js"
import { migrate, SCHEMA_VERSION } from "../../src/fleet/migrations.js"
import { TASKS_CHANNEL } from "../../src/fleet/channels.js"
import { fleetTaskStore } from "../../src/fleet/taskStore.js"
import { boxRowElsewhere, giveBoxRow, takeBoxRow } from "../../src/fleet/boxRows.js"
import { fleetRunFence } from "../../src/fleet/fence.js"
import { fenceLostNodes } from "../../src/fleet/loss.js"
import { beat, type NodeBeat, registerNode } from "../../src/fleet/nodes.js"
import { RunFence } from "../../src/run/RunFence.js"
import { fleetSpendLedger } from "../../src/fleet/spendLedger.js"
import { SpendLedger } from "../../src/spend/SpendLedger.js"
import { fleetMemoryLog } from "../../src/fleet/memoryStore.js"
import { MemoryStore, memoryStoreOver } from "../../src/memory/MemoryStore.js"
import { SqlClient } from "@effect/sql/SqlClient"
import { Files } from "../../src/fs/Files.js"
import type { TaskRecord } from "../../src/task/TaskRecord.js"
import { type NewTask, TaskStore } from "../../src/task/TaskStore.js"
import { viewEntriesOf } from "../../src/task/view.js"
import { Vault } from "../../src/vault/Vault.js"
import { fleetRunIndex, indexRunsOf } from "../../src/fleet/runIndex.js"
import { auditOf, findRun, pageOfRuns } from "../../src/run/query.js"
import { fleetAuditIndex } from "../../src/fleet/auditIndex.js"
import { Audit, type AuditRecord } from "../../src/gateway/base/Audit.js"
import { RunIndex } from "../../src/run/RunIndex.js"
import { TaintLog } from "../../src/run/TaintLog.js"
import { fleetTaintLog } from "../../src/fleet/taintLog.js"
import { isTainted } from "../../src/contract/taint.js"
import { approvalBoardOver, clearHeldOf } from "../../src/fleet/approvalBoard.js"
import { rpcKey } from "../../src/fleet/rpc/key.js"
import { makeApprovals } from "../../src/gateway/base/approvals.js"
const LIMITS = { perRun: 8, total: 64 }
import type { CardPlace, PendingApproval } from "../../src/contract/approval.js"
import { RunLog, type RunRecord } from "../../src/run/RunLog.js"
import type { FileSystem, Path } from "@effect/platform"
import { type Postgres, startPostgres } from "../support/postgres.js"

let runs = 0
/** A fresh run id in roster's format (the record's schema checks it). */
const runIdOf = () => `2026-12-02-00-00-00-${(runs++).toString(16).padStart(8, "0")}`

const newTask = (worker: string, prompt: string): NewTask => ({
  worker, prompt, ceilingMin: null, after: null, origin: { by: "person", run_id: null, task_id: null, via: "cli" }
})

describe("the fleet's task store: claims over one real Postgres from three nodes", () => {
  let pg: Postgres
  let cluster: ClusterSection
  const home = fs.mkdtempSync(path.join(os.tmpdir(), "roster-fleet-tasks-"))

  beforeAll(async () => {
    pg = await startPostgres()
    const org = Either.getOrThrow(decodeToml(OrgSchema, "org.toml", `[cluster]\ndatabase = "${pg.url}"\nshared_data = "${home}"\n`))
    cluster = org.cluster!
  })
  afterAll(() => {
    pg?.remove()
    fs.rmSync(home, { recursive: true, force: true })
  })

  /** One node's store and fence: its own connections to the database, its own data dir for the journal and views. */
  const nodeLayer = (node: string, instance: string | null = null) => {
    const root = path.join(home, node)
    const paths = Paths.layerAt({ config: path.join(root, "config"), data: path.join(root, "data"), state: path.join(root, "state"), home: root })
    const sql = fleetSqlLayer(cluster).pipe(Layer.provide(Vault.layerTest({})))
    return Layer.merge(fleetTaskStore(node, "test", Effect.succeed(instance)), fleetRunFence(node, Effect.succeed(instance ?? ""), 30, Effect.succeed(false))).pipe(
      Layer.provideMerge(sql),
      Layer.provide(Layer.mergeAll(paths, Files.layer, NodeContext.layer)),
      Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["PGPASSWORD", pg.password]]))))
    )
  }
  const onNodeEffect = <A, E>(node: string, instance: string, effect: Effect.Effect<A, E, TaskStore | RunFence | SqlClient>) =>
    Effect.provide(effect, nodeLayer(node, instance)) as Effect.Effect<A, E, never>
  const onNode = <A, E>(node: string, effect: Effect.Effect<A, E, TaskStore | RunFence | SqlClient>, instance: string | null = null) =>
    Effect.runPromise(Effect.provide(effect, nodeLayer(node, instance)) as Effect.Effect<A, E, never>)

  it("three nodes migrating at once apply each migration once", async () => {
    const results = await Promise.all(["n1", "n2", "n3"].map(() =>
      Effect.runPromise(migrate.pipe(
        Effect.provide(fleetSqlLayer(cluster).pipe(Layer.provide(Vault.layerTest({})))),
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["PGPASSWORD", pg.password]])))
      ))))
    expect(results.flatMap((r) => r.applied).sort((x, y) => parseInt(x) - parseInt(y))).toEqual([
      "1_nodes", "2_tasks", "3_fences", "4_spend", "5_memory", "6_runs", "7_audit", "8_taints", "9_approvals", "10_rpc_key", "11_claims", "12_boxes", "13_archive", "14_spend_channel", "15_task_functions", "16_worker_keys"
    ])
    expect(pg.sql("SELECT string_agg(migration_id::text, ',' ORDER BY migration_id) FROM roster_migrations")).toBe(Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1).join(","))
    // The runner RPC's key: three nodes asking at once get one key, made once.
    const keys = await Promise.all(["n1", "n2", "n3"].map((n) => onNode(n, rpcKey)))
    expect(keys[0]?.length).toBe(32)
    expect(keys.map((k) => k.toString("hex"))).toEqual(Array(3).fill(keys[0]?.toString("hex")))
    expect(pg.sql("SELECT count(*) FROM roster_rpc_key")).toBe("1")
  })

  it("40 tasks over 5 workers, claimed by three nodes at 2 at a time: each done exactly once, never two of one worker at once, every node ran some", async () => {
    await onNode("n1", Effect.flatMap(TaskStore, (s) =>
      Effect.forEach(Array.from({ length: 40 }, (_, i) => newTask(`w${i % 5}`, `task ${i}`)), s.add)))
    const intervals: Array<{ readonly worker: string; readonly node: string; readonly task: string; readonly from: number; readonly to: number }> = []
    const node = (name: string) =>
      Effect.gen(function*() {
        const store = yield* TaskStore
        const slots = yield* Effect.makeSemaphore(2)
        const runOne = (t: TaskRecord) =>
          Effect.gen(function*() {
            const runId = runIdOf()
            const claimed = yield* store.update(t.task_id, (x) => (x.status === "queued" ? { ...x, status: "running", run_ids: [...x.run_ids, runId] } : x))
            if (claimed.status !== "running" || claimed.run_ids.at(-1) !== runId) return
            const from = Date.now()
            yield* Effect.sleep("30 millis")
            intervals.push({ worker: t.worker, node: name, task: t.task_id, from, to: Date.now() })
            yield* store.update(t.task_id, (x) => ({ ...x, status: "done", finished_at: new Date().toISOString() }))
          })
        for (;;) {
          const all = yield* store.list
          if (all.every((t) => t.status === "done")) return
          const queued = all.filter((t) => t.status === "queued")
          const running = new Set(all.filter((t) => t.status === "running").map((t) => t.worker))
          // As the supervisor does: a worker's first queued task only, and none while one of its tasks runs anywhere.
          const firsts = queued.filter((t, i) => queued.findIndex((x) => x.worker === t.worker) === i)
          const free = firsts.filter((t) => !running.has(t.worker))
          const pick = free.slice(0, 2)
          yield* Effect.forEach(pick, (t) => slots.withPermits(1)(runOne(t)), { concurrency: "unbounded", discard: true })
          if (pick.length === 0) yield* Effect.sleep("5 millis")
        }
      })
    await Promise.all(["n1", "n2", "n3"].map((n) => onNode(n, node(n))))
    const all = await onNode("n2", Effect.flatMap(TaskStore, (s) => s.list))
    expect(all).toHaveLength(40)
    expect(all.every((t) => t.status === "done" && t.run_ids.length === 1 && t.attempt === 1)).toBe(true)
    expect(new Set(all.map((t) => t.node))).toEqual(new Set(["n1", "n2", "n3"]))
    expect(intervals).toHaveLength(40)
    for (const a of intervals) {
      const overlapping = intervals.filter((b) => b !== a && b.worker === a.worker && b.from < a.to && a.from < b.to)
      expect(overlapping, `${a.task} of ${a.worker} overlaps`).toEqual([])
    }
    // Queue order: a worker's tasks ran in the order they were added.
    for (const w of ["w0", "w1", "w2", "w3", "w4"]) {
      const mine = all.filter((t) => t.worker === w)
      const order = intervals.filter((i) => i.worker === w).sort((x, y) => x.from - y.from).map((i) => i.task)
      expect(order).toEqual(mine.map((t) => t.task_id))
    }
  })

  it("a node paints a worker's view from what its claim and its end statements gave back (no read of the queue), and it is the records' own view; a change that gave none is read", async () => {
    pg.sql("DELETE FROM roster_tasks WHERE status IN ('queued', 'running')")
    const [a, b, c] = await onNode("n1", Effect.flatMap(TaskStore, (s) => Effect.forEach(["one", "two", "three"], (p) => s.add(newTask("viewer", p)))))
    const viewFile = path.join(home, "n2", "data", "tasks", "views", "viewer.json")
    const painted = () => (JSON.parse(fs.readFileSync(viewFile, "utf8")) as { tasks: ReadonlyArray<unknown> }).tasks
    const records = () => onNode("n3", Effect.flatMap(TaskStore, (s) => s.list)).then((all) => viewEntriesOf("viewer", all))
    // The store closes at the end of each call: what it had to paint is painted by then.
    const claimed = await onNode("n2", Effect.flatMap(TaskStore, (s) => s.claimNext!({ busy: [], runId: runIdOf() })))
    expect(claimed?.task_id).toBe(a?.task_id)
    expect(painted()).toEqual(await records())
    expect(painted()).toMatchObject([{ task_id: a?.task_id, status: "running", run_id: claimed?.run_ids.at(-1) }, { task_id: b?.task_id, status: "queued" }, { task_id: c?.task_id }])
    await onNode("n2", Effect.flatMap(TaskStore, (s) => s.update(a!.task_id, (x) => ({ ...x, status: "done" }))))
    expect(painted()).toEqual(await records())
    expect(painted()).toHaveLength(2)
    // A task added on n2 (its statement gives no view): n2 reads the worker's queue to paint it.
    const d = await onNode("n2", Effect.flatMap(TaskStore, (s) => s.add(newTask("viewer", "four"))))
    expect(painted()).toEqual(await records())
    expect(painted()).toMatchObject([{ task_id: b?.task_id }, { task_id: c?.task_id }, { task_id: d.task_id, status: "queued" }])
    pg.sql("DELETE FROM roster_tasks WHERE worker = 'viewer'")
  })

  it("two nodes claiming two tasks of one worker at the same moment: the database lets one run, the other's claim comes back unchanged", async () => {
    const [a, b] = await onNode("n1", Effect.flatMap(TaskStore, (s) => Effect.all([s.add(newTask("solo", "one")), s.add(newTask("solo", "two"))])))
    const claim = (node: string, t: TaskRecord) =>
      onNode(node, Effect.flatMap(TaskStore, (s) => s.update(t.task_id, (x) => ({ ...x, status: "running", run_ids: [...x.run_ids, runIdOf()] }))))
    const [ra, rb] = await Promise.all([claim("n1", a!), claim("n2", b!)])
    expect([ra.status, rb.status].sort()).toEqual(["queued", "running"])
    expect(pg.sql("SELECT count(*) FROM roster_tasks WHERE worker = 'solo' AND status = 'running'")).toBe("1")
    const loser = ra.status === "queued" ? ra : rb
    expect(loser.run_ids).toEqual([])
    expect(loser.node).toBeUndefined()
  })

  it("the claim is one statement: in queue order, one per worker fleet-wide, what a task waits for done first; a row another holds (a node frozen mid-transaction) is stepped over, never waited for", async () => {
    pg.sql("DELETE FROM roster_tasks WHERE status IN ('queued', 'running')")
    const [first, second, other, waits] = await onNode("n1", Effect.flatMap(TaskStore, (s) =>
      Effect.all([s.add(newTask("cw", "one")), s.add(newTask("cw", "two")), s.add(newTask("cx", "three"))]).pipe(
        Effect.flatMap((ts) => Effect.map(s.add({ ...newTask("cy", "after one"), after: ts[0]!.task_id }), (w) => [...ts, w])))))
    const claimOn = (node: string, busy: ReadonlyArray<string> = []) =>
      onNode(node, Effect.flatMap(TaskStore, (s) => s.claimNext!({ busy, runId: runIdOf() })))
    // Queue order; cw's second waits while its first runs (anywhere); cy's waits for cw's first.
    const a = await claimOn("n1")
    expect(a?.task_id).toBe(first!.task_id)
    expect(a).toMatchObject({ status: "running", node: "n1", attempt: 1 })
    const b = await claimOn("n2")
    expect(b?.task_id).toBe(other!.task_id)
    expect(await claimOn("n3")).toBeUndefined()
    // A worker busy on this node (a chat session's box) is not claimed for either.
    await onNode("n1", Effect.flatMap(TaskStore, (s) => s.update(first!.task_id, (x) => ({ ...x, status: "done" }))))
    expect(await claimOn("n3", ["cw", "cy"])).toBeUndefined()
    const c = await claimOn("n3")
    expect([second!.task_id, waits!.task_id]).toContain(c?.task_id)

    // A frozen node: a transaction that holds the next task's row, its process stopped (SIGSTOP).
    pg.sql("DELETE FROM roster_tasks WHERE status IN ('queued', 'running')")
    const queued = await onNode("n1", Effect.flatMap(TaskStore, (s) => Effect.forEach(["f0", "f1", "f2", "f3"], (w) => s.add(newTask(w, `frozen ${w}`)))))
    const holder = await pg.hold(`SELECT 1 FROM roster_tasks WHERE task_id = '${queued[0]!.task_id}' FOR UPDATE`)
    try {
      process.kill(holder.pid, "SIGSTOP")
      const started = Date.now()
      const got = await Promise.all(["n1", "n2", "n3"].map((n) => claimOn(n)))
      // Every other task claimed at once, by the three nodes; the held one by none, and nobody waited for it.
      expect(got.map((t) => t?.task_id).sort()).toEqual(queued.slice(1).map((t) => t.task_id).sort())
      expect(Date.now() - started).toBeLessThan(2000)
      // A change that must take that very row waits only [cluster] lock_timeout_s, then fails and says so.
      const blocked = await onNode("n2", Effect.flatMap(TaskStore, (s) => s.update(queued[0]!.task_id, (x) => ({ ...x, reason: "x" }))).pipe(Effect.either))
      expect(Either.isLeft(blocked) && blocked.left.message).toMatch(/lock timeout/)
    } finally {
      process.kill(holder.pid, "SIGCONT")
      holder.release()
    }
  })

  it("one box per worker fleet-wide: a chat session's box row on one node keeps the worker's task waiting on every node; a running task keeps the session out; a dead instance's row is taken over", async () => {
    pg.sql("DELETE FROM roster_tasks WHERE status IN ('queued', 'running')")
    pg.sql("DELETE FROM roster_boxes")
    pg.sql(`INSERT INTO roster_nodes (name, instance, host, pid, version, started_at, heartbeat_at, node_clock, concurrency, config)
      VALUES ('s1', 'live-1', 'h', 1, 'v', now(), now(), now(), 2, '{}'::jsonb), ('s2', 'live-2', 'h', 2, 'v', now(), now(), now(), 2, '{}'::jsonb)
      ON CONFLICT (name) DO UPDATE SET instance = EXCLUDED.instance, fenced_at = NULL, left_at = NULL`)
    const claimOn = (node: string) => onNode(node, Effect.flatMap(TaskStore, (s) => s.claimNext!({ busy: [], runId: runIdOf() })))
    // A session of sw on s1 takes its row; sw's task, queued on s2, is claimed by no node.
    expect(await onNode("s1", takeBoxRow("sw", "s1", "live-1", "chat:slack:C1"))).toBe(true)
    const task = await onNode("s2", Effect.flatMap(TaskStore, (s) => s.add(newTask("sw", "after the session"))))
    expect(await claimOn("s2")).toBeUndefined()
    expect(await claimOn("s1")).toBeUndefined()
    // A second session of sw, on the other node, waits too.
    expect(await onNode("s2", takeBoxRow("sw", "s2", "live-2", "chat:discord:D1"))).toBe(false)
    expect(await onNode("s2", boxRowElsewhere("sw"))).toBe(true)
    // The session ends: the task is claimed, and now a session of sw is kept out while it runs.
    await onNode("s1", giveBoxRow("sw", "chat:slack:C1"))
    expect((await claimOn("s2"))?.task_id).toBe(task.task_id)
    expect(await onNode("s1", takeBoxRow("sw", "s1", "live-1", "chat:slack:C1"))).toBe(false)
    expect(pg.sql("SELECT count(*) FROM roster_boxes WHERE worker = 'sw'")).toBe("0")
    // A row left by an instance the fleet fenced (its node lost with a session open) holds nothing.
    pg.sql("UPDATE roster_tasks SET status = 'done' WHERE worker = 'sw'")
    expect(await onNode("s1", takeBoxRow("sw", "s1", "live-1", "chat:slack:C1"))).toBe(true)
    pg.sql("UPDATE roster_nodes SET fenced_at = now(), fenced_by = 's2' WHERE name = 's1'")
    const next = await onNode("s2", Effect.flatMap(TaskStore, (s) => s.add(newTask("sw", "after the lost session"))))
    expect((await claimOn("s2"))?.task_id).toBe(next.task_id)
    pg.sql("UPDATE roster_tasks SET status = 'done' WHERE worker = 'sw'")
    expect(await onNode("s2", takeBoxRow("sw", "s2", "live-2", "chat:discord:D1"))).toBe(true)
    expect(pg.sql("SELECT node || ' ' || run_key FROM roster_boxes WHERE worker = 'sw'")).toBe("s2 chat:discord:D1")
    pg.sql("DELETE FROM roster_boxes")
    pg.sql("DELETE FROM roster_nodes WHERE name IN ('s1', 's2')")
  })

  it("an add with a key in use, from three nodes at once: one task in the fleet, the others given it", async () => {
    const adds = await Promise.all(["n1", "n2", "n3", "n1", "n2", "n3"].map((n) =>
      onNode(n, Effect.flatMap(TaskStore, (s) => s.add({ ...newTask("kw", "keyed"), key: "fleet-key-1" })))))
    expect(new Set(adds.map((t) => t.task_id)).size).toBe(1)
    expect(adds.filter((t) => !t.existed)).toHaveLength(1)
    expect(pg.sql("SELECT count(*) FROM roster_tasks WHERE record->>'key' = 'fleet-key-1'")).toBe("1")
  })

  it("a key is its worker's own: another worker's add under the same key queues its own task, from any node", async () => {
    const kw = await onNode("n1", Effect.flatMap(TaskStore, (s) => s.add({ ...newTask("kw", "keyed"), key: "fleet-key-2" })))
    const kx = await onNode("n2", Effect.flatMap(TaskStore, (s) => s.add({ ...newTask("kx", "mine"), key: "fleet-key-2" })))
    expect(kx.existed).toBeFalsy()
    expect(kx.task_id).not.toBe(kw.task_id)
    expect(kx.worker).toBe("kx")
    expect(pg.sql("SELECT string_agg(worker, ',' ORDER BY worker) FROM roster_tasks WHERE record->>'key' = 'fleet-key-2'")).toBe("kw,kx")
  })

  it("finished tasks past keep_days move to the archive table in one statement, by the same rule as the files: a task a queued one waits on stays; any node reads the archive", async () => {
    const old = new Date(Date.now() - 40 * 86_400_000).toISOString()
    const [a, b, c] = await onNode("n1", Effect.flatMap(TaskStore, (s) =>
      Effect.gen(function*() {
        const added = yield* Effect.forEach(["done long ago", "waited on", "its answer owed"], (p) => s.add(newTask("aw", p)))
        const owed = { ...newTask("aw", "its answer owed"), replyTo: `task:${added[0]!.task_id}` }
        const third = yield* s.add(owed)
        for (const t of [added[0]!, added[1]!, third]) yield* s.update(t.task_id, (x) => ({ ...x, status: "done", finished_at: old }))
        yield* s.add({ ...newTask("aw", "after the second"), after: added[1]!.task_id })
        return [added[0]!, added[1]!, third]
      })))
    const moved = await onNode("n2", Effect.flatMap(TaskStore, (s) => s.archive(Date.now() - 30 * 86_400_000)))
    expect(moved).toBe(1)
    expect(pg.sql(`SELECT string_agg(task_id, ',') FROM roster_tasks_archive WHERE worker = 'aw'`)).toBe(a.task_id)
    const [shown, live, all] = await onNode("n3", Effect.flatMap(TaskStore, (s) => Effect.all([s.getArchived(a.task_id), s.get(a.task_id), s.listArchived])))
    expect(shown).toMatchObject({ task_id: a.task_id, status: "done", archived: true })
    expect(live).toBeUndefined()
    expect(all.map((t) => t.task_id)).toContain(a.task_id)
    expect(pg.sql(`SELECT count(*) FROM roster_tasks WHERE task_id IN ('${b.task_id}', '${c.task_id}')`)).toBe("2")
    expect(await onNode("n1", Effect.flatMap(TaskStore, (s) => s.archive(Date.now() - 30 * 86_400_000)))).toBe(0)
  })

  it("every fleet connection starts with bounded lock waits and statements, and the database ends a transaction a frozen node left open", async () => {
    const quickly = { ...cluster, lock_timeout_s: 1, statement_timeout_s: 4, idle_transaction_timeout_s: 1 }
    const settings = await Effect.runPromise(Effect.provide(
      Effect.flatMap(SqlClient, (sql) => sql<{ readonly lock_timeout: string; readonly statement_timeout: string; readonly idle: string }>`
        SELECT current_setting('lock_timeout') AS lock_timeout, current_setting('statement_timeout') AS statement_timeout,
          current_setting('idle_in_transaction_session_timeout') AS idle`),
      fleetSqlLayer(quickly).pipe(Layer.provide(Vault.layerTest({})), Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["PGPASSWORD", pg.password]])))))
    ) as Effect.Effect<ReadonlyArray<{ lock_timeout: string; statement_timeout: string; idle: string }>, never, never>)
    expect(settings[0]).toEqual({ lock_timeout: "1s", statement_timeout: "4s", idle: "1s" })
    // A node's transaction holding a row and then silent: the database ends it, and the row is free again.
    pg.sql("DELETE FROM roster_tasks WHERE status IN ('queued', 'running')")
    const [t] = await onNode("n1", Effect.flatMap(TaskStore, (s) => Effect.all([s.add(newTask("idle-w", "held then freed"))])))
    const held = await Effect.runPromise(Effect.provide(
      Effect.flatMap(SqlClient, (sql) => sql.withTransaction(
        sql`SELECT 1 FROM roster_tasks WHERE task_id = ${t!.task_id} FOR UPDATE`.pipe(Effect.zipRight(Effect.sleep("2500 millis")), Effect.zipRight(sql`SELECT 1`))
      )).pipe(Effect.exit),
      fleetSqlLayer(quickly).pipe(Layer.provide(Vault.layerTest({})), Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["PGPASSWORD", pg.password]])))))
    ) as Effect.Effect<Exit.Exit<unknown, unknown>, never, never>)
    // Its next statement finds the connection ended (and the rollback with it).
    expect(Exit.isFailure(held)).toBe(true)
    expect(await onNode("n2", Effect.flatMap(TaskStore, (s) => s.claimNext!({ busy: [], runId: runIdOf() })))).toMatchObject({ task_id: t!.task_id })
  })

  it("every change is announced on the channel the nodes listen on, and a missing task is NoSuchTask", async () => {
    const heard = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const client = yield* PgClient.PgClient
      const first = yield* Stream.runHead(client.listen(TASKS_CHANNEL)).pipe(Effect.fork)
      yield* Effect.sleep("300 millis")
      const added = yield* Effect.provide(Effect.flatMap(TaskStore, (s) => s.add(newTask("w0", "heard"))), nodeLayer("n3"))
      return { id: added.task_id, got: yield* first.await }
    })).pipe(
      Effect.provide(PgClient.layer({ host: "127.0.0.1", port: pg.port, database: "roster", username: "roster", password: Redacted.make(pg.password) })),
      Effect.orDie
    ))
    expect(heard.got._tag === "Success" && Option.getOrUndefined(heard.got.value)).toBe(heard.id)
    const missing = await onNode("n1", Effect.flip(Effect.flatMap(TaskStore, (s) => s.update("t-00000000", (x) => x))))
    expect(missing._tag).toBe("NoSuchTask")
  })

  it("a silent node is fenced once: a landing open on its row holds the fencing off; then its tasks are re-queued, its guard refuses and its claims lose", async () => {
    const beatOf = (name: string, instance: string): NodeBeat => ({
      name, instance, host: "other-host", pid: 1, version: "test", advertise: null, startedAt: Date.now(), boxes: 0, concurrency: 2, load: 0, config: {}
    })
    await onNode("f1", registerNode(beatOf("f1", "i-f1"), Date.now(), cluster).pipe(Effect.provide(NodeContext.layer)))
    await onNode("f2", registerNode(beatOf("f2", "i-f2"), Date.now(), cluster).pipe(Effect.provide(NodeContext.layer)))
    const [t, u] = await onNode("f1", Effect.flatMap(TaskStore, (st) => Effect.all([st.add(newTask("fw", "lost")), st.add(newTask("fw2", "kept"))])))
    const lostRun = runIdOf()
    const claim = (node: string, instance: string, task: TaskRecord, runId: string) =>
      onNode(node, Effect.flatMap(TaskStore, (st) =>
        st.update(task.task_id, (x) => (x.status === "queued" ? { ...x, status: "running", run_ids: [...x.run_ids, runId] } : x))), instance)
    expect(await claim("f1", "i-f1", t!, lostRun)).toMatchObject({ status: "running", node: "f1", attempt: 1 })
    expect(await claim("f2", "i-f2", u!, runIdOf())).toMatchObject({ status: "running", node: "f2" })
    // A landing of f1's run under way (begun while its lease held) when f1 goes silent past the timeout (its heartbeat set back an hour).
    const landed = await Effect.runPromise(Effect.gen(function*() {
      const release = yield* Deferred.make<void>()
      const landing = yield* onNodeEffect("f1", "i-f1", Effect.flatMap(RunFence, (fence) =>
        fence.guard({ runId: lostRun, taskId: t!.task_id }, Deferred.await(release).pipe(Effect.as("landed"))))).pipe(Effect.fork)
      yield* Effect.sleep("500 millis")
      pg.sql("UPDATE roster_nodes SET heartbeat_at = now() - interval '1 hour' WHERE name = 'f1'")
      // The sweep cannot take f1's row while the landing holds it: nothing fenced (it tries at the next beat).
      const during = yield* onNodeEffect("f2", "i-f2", fenceLostNodes(cluster, "f2"))
      expect(during).toEqual([])
      yield* Deferred.succeed(release, undefined)
      return yield* Fiber.join(landing)
    }))
    expect(landed).toBe("landed")
    // Its lease expired and the fence not yet written (a node thawed from a freeze): a landing begun now is refused all the same.
    const late = await onNode("f1", Effect.flip(Effect.flatMap(RunFence, (fence) => fence.guard({ runId: lostRun, taskId: t!.task_id }, Effect.succeed("landed late")))), "i-f1")
    expect(late._tag).toBe("Fenced")
    expect(late.message).toMatch(/node f1's lease has expired \(no heartbeat within \[cluster\] node_timeout_s = 30 s by the database's clock\)/)
    expect(pg.sql("SELECT fenced_at IS NULL FROM roster_nodes WHERE name = 'f1'")).toBe("t")
    const fenced = await onNode("f2", fenceLostNodes(cluster, "f2"))
    expect(fenced).toEqual([{ node: "f1", instance: "i-f1", tasks: [{ taskId: t!.task_id, worker: "fw", status: "queued" }] }])
    expect(await onNode("f3", fenceLostNodes(cluster, "f3"))).toEqual([])
    const after = await onNode("f2", Effect.flatMap(TaskStore, (st) => Effect.all([st.get(t!.task_id), st.get(u!.task_id)])))
    expect(after[0]).toMatchObject({ status: "queued", lost: [{ node: "f1", attempt: 1, run_id: lostRun, by: "f2" }] })
    expect(after[0]?.node).toBeUndefined()
    expect(after[1]).toMatchObject({ status: "running", node: "f2" })
    expect(pg.sql("SELECT fenced_by FROM roster_nodes WHERE name = 'f1'")).toBe("f2")
    // The fenced instance can land nothing, and cannot claim; the next claim elsewhere is attempt 2.
    const refused = await onNode("f1", Effect.flip(Effect.flatMap(RunFence, (fence) => fence.guard({ runId: lostRun, taskId: null }, Effect.succeed("x")))), "i-f1")
    expect(refused._tag).toBe("Fenced")
    expect(refused.message).toContain("node f1 was declared lost by the fleet")
    expect(await claim("f1", "i-f1", after[0]!, runIdOf())).toMatchObject({ status: "queued" })
    const retried = runIdOf()
    expect(await claim("f2", "i-f2", after[0]!, retried)).toMatchObject({ status: "running", node: "f2", attempt: 2 })
    // f2 beats on (its daemon would, every few seconds): its lease holds.
    pg.sql("UPDATE roster_nodes SET heartbeat_at = now() WHERE name = 'f2'")
    // The lost attempt's run is not the task's any more, even on a node that was never fenced.
    const stale = await onNode("f2", Effect.flip(Effect.flatMap(RunFence, (fence) => fence.guard({ runId: lostRun, taskId: t!.task_id }, Effect.succeed("x")))), "i-f2")
    expect(stale.message).toContain(`task ${t!.task_id} is no longer this run's`)
    expect(await onNode("f2", Effect.flatMap(RunFence, (fence) => fence.guard({ runId: retried, taskId: t!.task_id }, Effect.succeed("ok"))), "i-f2")).toBe("ok")
    // f1 joins again as a new instance: its mark is cleared and it may claim.
    await onNode("f1", registerNode(beatOf("f1", "i-f1b"), Date.now(), cluster).pipe(Effect.provide(NodeContext.layer)))
    expect(pg.sql("SELECT instance || ' ' || coalesce(fenced_by, '-') FROM roster_nodes WHERE name = 'f1'")).toBe("i-f1b -")
  })

  it("a lease that lapsed is not renewed by the node's next beat (it was frozen, its boxes ran on): the node fences its own instance as it joins again, its task re-queued; one that stood down while the database was gone is renewed (issue 64.4)", async () => {
    const beatOf = (instance: string): NodeBeat => ({
      name: "g1", instance, host: "other-host", pid: 1, version: "test", advertise: null, startedAt: Date.now(), boxes: 0, concurrency: 2, load: 0, config: {}
    })
    const beatOn = (instance: string, stoodDown: boolean) => onNode("g1", beat(beatOf(instance), Date.now(), cluster, stoodDown))
    const heartbeatAge = () => Number(pg.sql("SELECT extract(epoch FROM now() - heartbeat_at)::int FROM roster_nodes WHERE name = 'g1'"))
    await onNode("g1", registerNode(beatOf("i-g1"), Date.now(), cluster).pipe(Effect.provide(NodeContext.layer)))
    const [t] = await onNode("g1", Effect.flatMap(TaskStore, (st) => Effect.all([st.add(newTask("gw", "frozen"))])))
    const run = runIdOf()
    await onNode("g1", Effect.flatMap(TaskStore, (st) => st.update(t!.task_id, (x) => ({ ...x, status: "running" as const, run_ids: [run] }))), "i-g1")
    expect(await beatOn("i-g1", false)).toBe("ok")
    // Silent past node_timeout_s (30 s) by the database's clock, not yet past the fence's margin: no node has fenced it.
    pg.sql("UPDATE roster_nodes SET heartbeat_at = now() - interval '31 seconds' WHERE name = 'g1'")
    expect(await beatOn("i-g1", false)).toBe("lapsed")
    expect(heartbeatAge()).toBeGreaterThanOrEqual(31)
    expect(pg.sql("SELECT fenced_at IS NULL FROM roster_nodes WHERE name = 'g1'")).toBe("t")
    // A node that cut itself off (its boxes stopped before the lease could lapse) beats again as it was.
    expect(await beatOn("i-g1", true)).toBe("ok")
    expect(heartbeatAge()).toBeLessThan(2)
    pg.sql("UPDATE roster_nodes SET heartbeat_at = now() - interval '31 seconds' WHERE name = 'g1'")
    expect(await beatOn("i-g1", false)).toBe("lapsed")
    // It joins again as a new instance (same process, so no other node's fence was needed): the old one fenced by it, its task queued again.
    const fenced = await onNode("g1", registerNode(beatOf("i-g1b"), Date.now(), cluster, "i-g1").pipe(Effect.provide(NodeContext.layer)))
    expect(fenced).toEqual({ node: "g1", instance: "i-g1", tasks: [{ taskId: t!.task_id, worker: "gw", status: "queued" }] })
    expect(await onNode("g1", Effect.flatMap(TaskStore, (st) => st.get(t!.task_id)))).toMatchObject({ status: "queued", lost: [{ node: "g1", attempt: 1, run_id: run, by: "g1" }] })
    expect(pg.sql("SELECT instance || ' ' || (fenced_at IS NULL)::text FROM roster_nodes WHERE name = 'g1'")).toBe("i-g1b true")
    expect(await beatOn("i-g1", false)).toBe("taken")
    expect(await beatOn("i-g1b", false)).toBe("ok")
  })

  it("the spend ledger is the fleet's: one node's answers count in another's budget sums once written, a retried write lands once, usage sums every node", async () => {
    const ledgerOn = (node: string) =>
      fleetSpendLedger(node).pipe(
        Layer.provide(fleetSqlLayer(cluster).pipe(Layer.provide(Vault.layerTest({})))),
        Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["PGPASSWORD", pg.password]]))))
      )
    const run = runIdOf()
    const now = new Date().toISOString()
    const entry = { time: now, run_id: run, worker: "spender", model: "m", input: 100, output: 50, cache_read: 0, cache_write: 0, usd: 0.25, priced: true }
    const seen = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const l1 = yield* Layer.build(ledgerOn("l1")).pipe(Effect.map(Context.get(SpendLedger)))
      const l2 = yield* Layer.build(ledgerOn("l2")).pipe(Effect.map(Context.get(SpendLedger)))
      l1.count(entry)
      // Counted on l1 at once; l2 sees it once l1 has written it.
      const counted = { l1: yield* l1.spent("spender", run, now), l2: yield* l2.spent("spender", run, now) }
      yield* l1.persist(entry)
      yield* l1.persist(entry)
      const written = { l1: yield* l1.spent("spender", run, now), l2: yield* l2.spent("spender", "2026-12-02-00-00-00-ffffffff", now) }
      l2.count({ ...entry, worker: "other", run_id: runIdOf(), usd: 0.5 })
      const orgDay = (yield* l2.spent("spender", run, now)).orgDayUsd
      const usage = yield* l1.usage(now.slice(0, 10), Option.none())
      // The database stops: the budgets read its sums as last seen plus this node's answers since,
      // which are written once it is back.
      pg.stop()
      const later = { ...entry, run_id: run, usd: 0.125 }
      const outage = yield* Effect.gen(function*() {
        l1.count(later)
        yield* l1.persist(later)
        return yield* l1.spent("spender", run, now)
      }).pipe(Effect.ensuring(Effect.sync(() => pg.start())))
      const rewritten = yield* Effect.gen(function*() {
        const got = yield* l2.spent("spender", run, now)
        return got.runUsd === 0.375 ? got : yield* Effect.fail("not yet")
      }).pipe(Effect.retry({ schedule: Schedule.spaced("500 millis"), times: 30 }))
      return { counted, written, orgDay, usage, outage, rewritten }
    })).pipe(Effect.orDie))
    expect(seen.counted.l1).toEqual({ runUsd: 0.25, runTokens: 150, workerDayUsd: 0.25, orgDayUsd: 0.25, channelDayUsd: 0 })
    expect(seen.counted.l2.workerDayUsd).toBe(0)
    expect(seen.written.l1).toEqual({ runUsd: 0.25, runTokens: 150, workerDayUsd: 0.25, orgDayUsd: 0.25, channelDayUsd: 0 })
    expect(seen.written.l2).toMatchObject({ runUsd: 0, workerDayUsd: 0.25, orgDayUsd: 0.25 })
    // l2's own unwritten answer (another worker) counts toward the org's day there.
    expect(seen.orgDay).toBe(0.75)
    // Each answer once, however often its write was tried: the first, and the one counted during the outage.
    expect(pg.sql(`SELECT string_agg(usd::text || ' ' || node, ',' ORDER BY usd) FROM roster_spend WHERE run_id = '${run}'`)).toBe("0.125 l1,0.25 l1")
    expect(seen.usage.get("spender")).toEqual({ runs: 1, answers: 1, input: 100, output: 50, cache_read: 0, cache_write: 0, usd: 0.25, unpriced: 0 })
    expect(seen.outage).toMatchObject({ runUsd: 0.375, workerDayUsd: 0.375 })
    // Written by l1's retry once the database answered: l2 reads it from there.
    expect(seen.rewritten.workerDayUsd).toBe(0.375)
  })

  it("a chat channel's day is the fleet's: every node's answers charged to it count in its budget sums and in usage --channel", async () => {
    const ledgerOn = (node: string) =>
      fleetSpendLedger(node).pipe(
        Layer.provide(fleetSqlLayer(cluster).pipe(Layer.provide(Vault.layerTest({})))),
        Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["PGPASSWORD", pg.password]]))))
      )
    const now = new Date().toISOString()
    const entry = (run: string, usd: number, chat?: string) => ({
      time: now, run_id: run, worker: "chatter", model: "m", input: 10, output: 5, cache_read: 0, cache_write: 0, usd, priced: true,
      ...(chat ? { chat_channel: chat } : {})
    })
    const [r1, r2, r3] = [runIdOf(), runIdOf(), runIdOf()]
    const seen = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const l1 = yield* Layer.build(ledgerOn("c1")).pipe(Effect.map(Context.get(SpendLedger)))
      const l2 = yield* Layer.build(ledgerOn("c2")).pipe(Effect.map(Context.get(SpendLedger)))
      for (const [l, e] of [[l1, entry(r1, 1, "slack:c0fleet")], [l2, entry(r2, 2, "slack:c0fleet")], [l2, entry(r3, 4)]] as const) {
        l.count(e)
        yield* l.persist(e)
      }
      // Counted on c1 but not yet written: c1 sees it, c2 does not.
      l1.count(entry(runIdOf(), 8, "slack:c0fleet"))
      return {
        onL1: yield* l1.spent("chatter", r1, now, "slack:c0fleet"),
        onL2: yield* l2.spent("chatter", r3, now, "slack:c0fleet"),
        noChannel: yield* l2.spent("chatter", r3, now),
        usage: yield* l2.usage(now.slice(0, 10), Option.none(), Option.some("slack:c0fleet"))
      }
    })).pipe(Effect.orDie))
    expect(seen.onL1).toMatchObject({ runUsd: 1, channelDayUsd: 11 })
    expect(seen.onL2).toMatchObject({ runUsd: 4, workerDayUsd: 7, channelDayUsd: 3 })
    expect(seen.noChannel.channelDayUsd).toBe(0)
    expect(seen.usage.get("chatter")).toMatchObject({ runs: 2, answers: 2, usd: 3 })
  })

  it("worker memory is the fleet's: one node's entry is every node's, a bound holds across nodes writing at once, a hold reaches every node", async () => {
    // Each node's own connections to the one database.
    const memoryOn = () =>
      Layer.effect(MemoryStore, Effect.map(SqlClient, (sql) => memoryStoreOver(fleetMemoryLog(sql)))).pipe(
        Layer.provide(fleetSqlLayer(cluster).pipe(Layer.provide(Vault.layerTest({})))),
        Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["PGPASSWORD", pg.password]]))))
      )
    const bounds = { max_entries: 3, entry_max: 100 }
    const result = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const m1 = yield* Layer.build(memoryOn()).pipe(Effect.map(Context.get(MemoryStore)))
      const m2 = yield* Layer.build(memoryOn()).pipe(Effect.map(Context.get(MemoryStore)))
      const run = runIdOf()
      const first = yield* m1.add("rememberer", { text: "the build needs node 22", scope: "worker", runId: run, pending: false }, bounds)
      const seenOn2 = yield* m2.list("rememberer")
      // Five writers on two nodes at once against a bound of 3 (one entry already in): two more land, three are refused.
      const racing = yield* Effect.all(Array.from({ length: 5 }, (_, i) =>
        (i % 2 === 0 ? m1 : m2).add("rememberer", { text: `fact ${i}`, scope: "worker", runId: runIdOf(), pending: false }, bounds).pipe(Effect.either)
      ), { concurrency: "unbounded" })
      const held = yield* m2.holdRun("rememberer", run, "tainted: egress_refused")
      return { first, seenOn2, racing, held, after: yield* m1.list("rememberer") }
    })).pipe(Effect.orDie))
    expect(result.seenOn2).toEqual([result.first])
    expect(result.racing.filter((r) => r._tag === "Right")).toHaveLength(2)
    expect(result.racing.filter((r) => r._tag === "Left").map((r) => r._tag === "Left" && r.left._tag === "MemoryRefused" && r.left.status)).toEqual([429, 429, 429])
    expect(result.after).toHaveLength(3)
    expect(result.held).toBe(1)
    expect(result.after.find((e) => e.id === result.first.id)).toMatchObject({ pending: true, held_reason: "tainted: egress_refused" })
  })
  /** A node's run log, run index and taint log over a shared folder, on its own connections. */
  const fleetRunsOn = (shared: string, node: string) => {
    const nodeHome = path.join(shared, "..", `${path.basename(shared)}-${node}`)
    fs.mkdirSync(path.join(nodeHome, "config"), { recursive: true })
    fs.writeFileSync(path.join(nodeHome, "config", "org.toml"), `[cluster]\ndatabase = "${pg.url}"\nshared_data = "${shared}"\nnode = "${node}"\n`)
    const paths = Paths.fromEnv({ ROSTER_HOME: nodeHome, HOME: nodeHome })
    return Layer.provideMerge(RunLog.layerIndexed, Layer.merge(fleetRunIndex, fleetTaintLog)).pipe(
      Layer.provideMerge(fleetSqlLayer(cluster).pipe(Layer.provide(Vault.layerTest({})))),
      Layer.provideMerge(Layer.mergeAll(Paths.layerAt(paths), NodeContext.layer)),
      Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["PGPASSWORD", pg.password]]))))
    )
  }
  it("the run index: runs two nodes started and ended are listed from either, newest first, by worker, with totals; what the database could not take is indexed when it answers; a node's start fills in what its runs left out", async () => {
    const shared = path.join(home, "runs-shared")
    const runsOn = (node: string) => fleetRunsOn(shared, node)
    const [r1, r2, r3, r4, r5] = ["01", "02", "03", "04", "05"].map((s) => `2026-12-03-10-00-${s}-0000abcd`) as [string, string, string, string, string]
    const listed = (p: { readonly runs: ReadonlyArray<RunRecord>; readonly total: number }) => ({ ids: p.runs.map((r) => r.run_id), total: p.total })
    const seen = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const n1 = yield* Layer.build(runsOn("n1"))
      const n2 = yield* Layer.build(runsOn("n2"))
      const on = <A, E>(ctx: typeof n1, e: Effect.Effect<A, E, RunLog | RunIndex | TaintLog | Paths | FileSystem.FileSystem | Path.Path | SqlClient>) => Effect.provide(e, ctx)
      yield* on(n1, Effect.flatMap(RunLog, (log) => log.start({ runId: r1, worker: "alice", kind: "box" })))
      yield* on(n1, Effect.flatMap(RunLog, (log) => log.start({ runId: r2, worker: "bob", kind: "task", taskId: "t-0000abcd" })))
      yield* on(n2, Effect.flatMap(RunLog, (log) => log.start({ runId: r3, worker: "alice", kind: "box" })))
      yield* on(n1, Effect.flatMap(RunLog, (log) => log.finish("alice", r1, { endedBy: "exit", exitCode: 0 })))
      const firstPage = yield* on(n2, pageOfRuns(0, 2))
      const alices = yield* on(n2, pageOfRuns(0, 10, Option.some("alice")))
      const bobs = yield* on(n2, findRun(r2))
      // A run folder the index lacks (its process ended while the database was down) is not listed
      // until its node's daemon starts and fills it in; another node's start leaves it alone.
      const left = path.join(shared, "runs", "carol", r4)
      fs.mkdirSync(left, { recursive: true })
      fs.writeFileSync(path.join(left, "run.json"), JSON.stringify({
        run_id: r4, worker: "carol", kind: "box", task_id: null, started_at: "2026-12-03T10:00:04.000Z",
        finished_at: "2026-12-03T10:01:00.000Z", ended_by: "exit", exit_code: 0, error: null, node: "n1"
      }))
      const beforeFill = yield* on(n2, pageOfRuns(0, 10))
      const filledByN2 = yield* on(n2, indexRunsOf("n2"))
      const filledByN1 = yield* on(n1, indexRunsOf("n1"))
      const afterFill = yield* on(n2, pageOfRuns(0, 10))
      // The database down: a run still starts (its folder is the truth) and readers list the folders.
      pg.stop()
      const started = yield* on(n1, Effect.flatMap(RunLog, (log) => log.start({ runId: r5, worker: "alice", kind: "box" })).pipe(Effect.either))
      const whileDown = yield* on(n2, pageOfRuns(0, 10))
      pg.start()
      const deadline = Date.now() + 20_000
      while (pg.sql(`SELECT count(*) FROM roster_runs WHERE run_id = '${r5}'`) !== "1" && Date.now() < deadline) yield* Effect.sleep("250 millis")
      const afterOutage = yield* on(n2, pageOfRuns(0, 10))
      return {
        firstPage: listed(firstPage), alices: listed(alices), aliceEnd: alices.runs.find((r) => r.run_id === r1)?.ended_by, bob: bobs?.worker,
        beforeFill: listed(beforeFill), filledByN2, filledByN1, afterFill: listed(afterFill),
        started: started._tag, whileDown: listed(whileDown), afterOutage: listed(afterOutage)
      }
    })).pipe(Effect.orDie))
    expect(seen.firstPage).toEqual({ ids: [r3, r2], total: 3 })
    expect(seen.alices).toEqual({ ids: [r3, r1], total: 2 })
    expect(seen.aliceEnd).toBe("exit")
    expect(seen.bob).toBe("bob")
    expect(seen.beforeFill).toEqual({ ids: [r3, r2, r1], total: 3 })
    expect([seen.filledByN2, seen.filledByN1]).toEqual([0, 1])
    expect(seen.afterFill).toEqual({ ids: [r4, r3, r2, r1], total: 4 })
    expect(seen.started).toBe("Right")
    expect(seen.whileDown).toEqual({ ids: [r5, r4, r3, r2, r1], total: 5 })
    expect(seen.afterOutage).toEqual({ ids: [r5, r4, r3, r2, r1], total: 5 })
    expect(pg.sql(`SELECT string_agg(run_id || ' ' || worker || ' ' || node || ' ' || coalesce(ended_by, '-'), ',' ORDER BY run_id) FROM roster_runs`)).toBe(
      [`${r1} alice n1 exit`, `${r2} bob n1 -`, `${r3} alice n2 -`, `${r4} carol n1 exit`, `${r5} alice n1 -`].join(",")
    )
  })
  it("the audit index: where each run's requests begin in its node's day file, said as the log closes; runs show reads each run from there, and only its days", async () => {
    const shared = path.join(home, "audit-shared")
    const nodeHome = path.join(home, "audit-n1")
    fs.mkdirSync(path.join(nodeHome, "config"), { recursive: true })
    fs.writeFileSync(path.join(nodeHome, "config", "org.toml"), `[cluster]\ndatabase = "${pg.url}"\nshared_data = "${shared}"\nnode = "n1"\n`)
    const paths = Paths.fromEnv({ ROSTER_HOME: nodeHome, HOME: nodeHome })
    const layer = Layer.provideMerge(Audit.layerIndexed, fleetAuditIndex).pipe(
      Layer.provideMerge(fleetSqlLayer(cluster).pipe(Layer.provide(Vault.layerTest({})))),
      Layer.provideMerge(Layer.mergeAll(Paths.layerAt(paths), Files.layer, NodeContext.layer)),
      Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["PGPASSWORD", pg.password]]))))
    )
    const [a, b, c] = ["2026-12-03-11-00-01-0000aaaa", "2026-12-03-11-00-02-0000bbbb", "2026-12-03-11-00-03-0000cccc"] as const
    const day = new Date().toISOString().slice(0, 10)
    const dir = path.join(shared, "audit", "n1")
    const request = (runId: string | null, p: string): AuditRecord => ({
      run_id: runId, subject: "box", host: "api.example.test", port: 443, method: "GET", path: p, status: 200,
      injected: false, bytes_up: 1, bytes_down: 2, duration_ms: 3
    })
    // Lines already in today's file: b's (as if an earlier run with its id, before the index knew it) and c's (never indexed).
    fs.mkdirSync(dir, { recursive: true })
    const before = [b, c].map((id) => JSON.stringify({ time: `${day}T00:00:00.000Z`, ...request(id, "/before") })).join("\n") + "\n"
    fs.writeFileSync(path.join(dir, `${day}.jsonl`), before)
    // Two days after the runs end: a's id there is past what its record says it could have written.
    const later = new Date(Date.now() + 3 * 86_400_000).toISOString().slice(0, 10)
    fs.writeFileSync(path.join(dir, `${later}.jsonl`), JSON.stringify({ time: `${later}T00:00:00.000Z`, ...request(a, "/later") }) + "\n")
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const audit = yield* Audit
      for (const [id, p] of [[a, "/a1"], [b, "/b1"], [null, "/none"], [a, "/a2"]] as const) yield* audit.write(request(id, p))
    })).pipe(Effect.provide(layer)))
    const rows = pg.sql("SELECT string_agg(run_id || ' ' || day || ' ' || node || ' ' || first_offset || ' ' || requests, ',' ORDER BY run_id) FROM roster_audit")
    const content = fs.readFileSync(path.join(dir, `${day}.jsonl`))
    /** Where the line of the request to `p` begins. */
    const offsetOf = (p: string) => content.lastIndexOf("\n", content.indexOf(`"path":"${p}"`)) + 1
    expect(rows).toBe([`${a} ${day} n1 ${offsetOf("/a1")} 2`, `${b} ${day} n1 ${offsetOf("/b1")} 1`].join(","))
    expect(offsetOf("/a1")).toBe(Buffer.byteLength(before))
    const shown = (id: string) =>
      Effect.runPromise(auditOf({ run_id: id, started_at: `${day}T00:00:00.000Z`, finished_at: `${day}T00:00:01.000Z`, node: "n1" }).pipe(
        Effect.map((lines) => lines.map((l) => l.path)),
        Effect.provide(layer)
      ))
    // b from its indexed offset (its line before it is not read), a not from the day past its end, c (unindexed) the long way.
    expect(await shown(b)).toEqual(["/b1"])
    expect(await shown(a)).toEqual(["/a1", "/a2"])
    expect(await shown(c)).toEqual(["/before"])
  })
  it("the taint log: a taint on the run's node and an untaint on another are rows of the fleet's table, seen by both; a taint the database cannot take is kept in the node's events file and counted when it answers; a decision waits for the log", async () => {
    const shared = path.join(home, "taints-shared")
    const runId = "2026-12-03-12-00-00-0000dddd"
    const taint = (time: string) => ({ kind: "taint" as const, taint: { reason: "egress_refused" as const, host: "exfil.example.test", time } })
    type Seen = { readonly tainted: number; readonly open: boolean; readonly untaint: string | undefined }
    const seenOf = (r: RunRecord | undefined): Seen => ({ tainted: r?.tainted?.length ?? -1, open: r !== undefined && isTainted(r), untaint: r?.untainted?.reason })
    const seen = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const n1 = yield* Layer.build(fleetRunsOn(shared, "n1"))
      const n2 = yield* Layer.build(fleetRunsOn(shared, "n2"))
      const on = <A, E>(ctx: typeof n1, e: Effect.Effect<A, E, RunLog | RunIndex | TaintLog | Paths | FileSystem.FileSystem | Path.Path | SqlClient>) => Effect.provide(e, ctx)
      yield* on(n1, Effect.flatMap(RunLog, (log) => log.start({ runId, worker: "alice", kind: "box" })))
      yield* on(n1, Effect.flatMap(RunLog, (log) => log.append("alice", runId, taint("2026-12-03T12:00:01.000Z"))))
      yield* on(n2, Effect.flatMap(RunLog, (log) => log.append("alice", runId, {
        kind: "untaint", untaint: { reason: "looked from n2", at: "2026-12-03T12:00:02.000Z", cleared: 1, landed: [] }
      })))
      const onN1 = seenOf(yield* on(n1, Effect.flatMap(RunLog, (log) => log.read("alice", runId))))
      const onN2 = seenOf(yield* on(n2, findRun(runId)))
      const listedN2 = seenOf((yield* on(n2, pageOfRuns(0, 5))).runs.find((r) => r.run_id === runId))
      const filesBefore = fs.readdirSync(path.join(shared, "runs", "alice", runId)).filter((f) => f.startsWith("events"))
      // The database down: the gateway's taint is not lost (kept in n1's own file), and no decision is made on what cannot be known.
      pg.stop()
      const keptWhileDown = yield* on(n1, Effect.flatMap(RunLog, (log) => log.append("alice", runId, taint("2026-12-03T12:00:03.000Z"))).pipe(Effect.either))
      const decisionWhileDown = yield* on(n2, Effect.flatMap(RunLog, (log) => log.readForDecision("alice", runId)).pipe(Effect.either))
      const shownWhileDown = (yield* on(n2, Effect.flatMap(RunLog, (log) => log.read("alice", runId))))?.run_id
      pg.start()
      const deadline = Date.now() + 20_000
      let back = yield* on(n2, Effect.flatMap(RunLog, (log) => log.readForDecision("alice", runId)).pipe(Effect.either))
      while (back._tag === "Left" && Date.now() < deadline) {
        yield* Effect.sleep("250 millis")
        back = yield* on(n2, Effect.flatMap(RunLog, (log) => log.readForDecision("alice", runId)).pipe(Effect.either))
      }
      return {
        onN1, onN2, listedN2, filesBefore, keptWhileDown: keptWhileDown._tag,
        decisionWhileDown: decisionWhileDown._tag === "Left" ? decisionWhileDown.left.message : "answered", shownWhileDown,
        afterOutage: seenOf(Either.getOrUndefined(back)),
        openAfter: Either.getOrUndefined(back)?.tainted?.slice(1).map((t) => t.time)
      }
    })).pipe(Effect.orDie))
    const decided: Seen = { tainted: 1, open: false, untaint: "looked from n2" }
    expect([seen.onN1, seen.onN2, seen.listedN2]).toEqual([decided, decided, decided])
    expect(pg.sql(`SELECT string_agg(node || ' ' || (event->>'kind'), ',' ORDER BY seq) FROM roster_taints WHERE run_id = '${runId}'`)).toBe("n1 taint,n2 untaint")
    expect(seen.filesBefore).toEqual([])
    expect(seen.keptWhileDown).toBe("Right")
    expect(seen.decisionWhileDown).toContain("the fleet's taint log did not answer")
    expect(seen.shownWhileDown).toBe(runId)
    expect(fs.readFileSync(path.join(shared, "runs", "alice", runId, "events.n1.jsonl"), "utf8")).toContain("2026-12-03T12:00:03.000Z")
    // In time order: the untaint cleared the first taint; the one kept in the file while the database was down taints it again.
    expect(seen.afterOutage).toEqual({ tainted: 2, open: true, untaint: "looked from n2" })
    expect(seen.openAfter).toEqual(["2026-12-03T12:00:03.000Z"])
  })
  it("held requests on the fleet's board: held on one node, listed and decided on another, taken by the holding node; the first decision stands; one nobody decides goes", async () => {
    const ask = (host: string) => ({ run_id: "2026-12-03-13-00-00-0000eeee", worker: "alice", subject: "box", method: "CONNECT", host, port: 443, path: null })
    const seen = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const sql = (yield* Layer.build(fleetSqlLayer(cluster).pipe(Layer.provide(Vault.layerTest({}))))).pipe(Context.get(SqlClient))
      const [b1, b2] = [approvalBoardOver(sql, "n1"), approvalBoardOver(sql, "n2")]
      const held = makeApprovals(b1)
      const now = Date.now()
      const waiting = yield* Effect.fork(held.ask(ask("decided.example.test"), now, 20_000, LIMITS, Effect.never))
      let listed: ReadonlyArray<PendingApproval> = []
      for (let i = 0; i < 40 && listed.length === 0; i++) listed = yield* b2.waiting.pipe(Effect.tap(() => Effect.sleep("50 millis")))
      const id = listed[0]?.id ?? "none"
      const first = yield* b2.decide(id, { decision: "run", by: "a person on n2" })
      const second = yield* b2.decide(id, { decision: "deny", by: "someone later" })
      const answer = yield* Fiber.join(waiting)
      const rowsAfter = pg.sql(`SELECT count(*) FROM roster_approvals WHERE id = '${id}'`)
      // Nobody decides: the request gets its refusal when its wait runs out, and leaves the board.
      const lapsed = yield* held.ask(ask("lapsed.example.test"), Date.now(), 1_500, LIMITS, Effect.never)
      const lateDecision = yield* b2.decide(id, { decision: "once", by: "too late" })
      return {
        listed: listed.map((a) => `${a.node} ${a.host}`), first: Option.map(first, (a) => a.host), second: second._tag, answer,
        forRun: held.allowedForRun(ask("x").run_id, "decided.example.test", 443), rowsAfter, lapsed: lapsed._tag, lateDecision: lateDecision._tag,
        left: pg.sql("SELECT count(*) FROM roster_approvals")
      }
    })).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["PGPASSWORD", pg.password]]))), Effect.orDie))
    expect(seen.listed).toEqual(["n1 decided.example.test"])
    expect(seen.first).toEqual(Option.some("decided.example.test"))
    expect(seen.second).toBe("None")
    expect(seen.answer).toEqual({ _tag: "decided", decided: { decision: "run", by: "a person on n2" } })
    expect(seen.forRun).toBe(true)
    expect(seen.rowsAfter).toBe("0")
    expect([seen.lapsed, seen.lateDecision, seen.left]).toEqual(["timeout", "None", "0"])
  })

  it("a held request is bound to its card on the fleet's board (real Postgres): a decision from another node that names another card decides nothing, its own card (keys in any order) decides it (issue 64.5)", async () => {
    const card: CardPlace = { provider: "slack", connection: "slack", channel: "C0B", thread: "10.1", message: "10.2" }
    const ask = { run_id: "2026-12-03-13-00-00-0000cccc", worker: "alice", subject: "box", method: "CONNECT", host: "carded.example.test", port: 443, path: null }
    const seen = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const sql = (yield* Layer.build(fleetSqlLayer(cluster).pipe(Layer.provide(Vault.layerTest({}))))).pipe(Context.get(SqlClient))
      const [b1, b2] = [approvalBoardOver(sql, "n1"), approvalBoardOver(sql, "n2")]
      const held = makeApprovals(b1)
      const waiting = yield* Effect.fork(held.ask(ask, Date.now(), 20_000, LIMITS, Effect.never, () => Effect.succeed(card)))
      let listed: ReadonlyArray<PendingApproval> = []
      for (let i = 0; i < 40 && listed[0]?.card === undefined; i++) listed = yield* b2.waiting.pipe(Effect.tap(() => Effect.sleep("50 millis")))
      const id = listed[0]?.id ?? "none"
      const decided = { decision: "once" as const, by: "slack:U0B", where: "slack channel C0B" }
      const elsewhere = yield* b2.decide(id, decided, { ...card, channel: "C0A" })
      const forged = yield* b2.decide(id, decided, { ...card, message: "11.1" })
      const noThread = yield* b2.decide(id, decided, { provider: "slack", connection: "slack", channel: "C0B", message: "10.2" })
      const stillWaiting = Option.isNone(yield* Fiber.poll(waiting))
      const reordered: CardPlace = { message: "10.2", thread: "10.1", channel: "C0B", connection: "slack", provider: "slack" }
      const own = yield* b2.decide(id, decided, reordered)
      return { card: listed[0]?.card, refused: [elsewhere._tag, forged._tag, noThread._tag], stillWaiting, own: own._tag, answer: yield* Fiber.join(waiting) }
    })).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["PGPASSWORD", pg.password]]))), Effect.orDie))
    expect(seen.card).toEqual(card)
    expect(seen.refused).toEqual(["None", "None", "None"])
    expect(seen.stillWaiting).toBe(true)
    expect(seen.own).toBe("Some")
    expect(seen.answer).toEqual({ _tag: "decided", decided: { decision: "once", by: "slack:U0B", where: "slack channel C0B" } })
  })

  it("a request whose node was lost or left is neither listed nor decidable on another; a node's new daemon takes its old rows down", async () => {
    const held = (id: string, node: string): PendingApproval => ({
      id, run_id: "2026-12-03-13-00-00-0000dddd", worker: "alice", subject: "box", method: "CONNECT", host: `${id}.example.test`, port: 443, path: null,
      asked_at: new Date().toISOString(), expires_at: new Date(Date.now() + 60_000).toISOString(), node
    })
    const seen = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const sql = (yield* Layer.build(fleetSqlLayer(cluster).pipe(Layer.provide(Vault.layerTest({}))))).pipe(Context.get(SqlClient))
      const [gone, live, other] = [approvalBoardOver(sql, "gone-node"), approvalBoardOver(sql, "live-node"), approvalBoardOver(sql, "n2")]
      yield* gone.post(held("ap-gone", "gone-node"))
      yield* live.post(held("ap-live", "live-node"))
      const before = (yield* other.waiting).map((a) => a.id)
      // gone-node is declared lost by the fleet (fenced); its held connection died with it.
      yield* sql`INSERT INTO roster_nodes (name, instance, host, pid, version, started_at, heartbeat_at, node_clock, concurrency, config, fenced_at, fenced_by)
        VALUES ('gone-node', 'i1', 'h', 1, 'v', now(), now(), now(), 2, '{}'::jsonb, now(), 'n2')`
      const after = (yield* other.waiting).map((a) => a.id)
      const decided = yield* other.decide("ap-gone", { decision: "once", by: "a person on n2" })
      // live-node's daemon starts again: what its killed daemon held is taken down.
      yield* clearHeldOf(sql, "live-node")
      const restarted = (yield* other.waiting).map((a) => a.id)
      yield* sql`DELETE FROM roster_nodes WHERE name = 'gone-node'`
      yield* sql`DELETE FROM roster_approvals`
      return { before, after, decided: decided._tag, restarted }
    })).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["PGPASSWORD", pg.password]]))), Effect.orDie))
    expect(seen.before.sort()).toEqual(["ap-gone", "ap-live"])
    expect(seen.after).toEqual(["ap-live"])
    expect(seen.decided).toBe("None")
    expect(seen.restarted).toEqual([])
  })
})
