// A fleet on Postgres against one machine on files, measured in the same run: how long from
// `task add` (the control API call the CLI makes) to the task's box started (the engine's own
// event), one node on files against three nodes on a real Postgres; how many claims per second
// three nodes' task stores make over one database (one machine's file store alone is the
// baseline); and what being in a fleet costs an idle daemon (RSS and CPU against the same daemon
// without [cluster]). The scripted engine; needs Docker and Postgres (scripts/ensure-host.sh).
import * as NodeContext from "@effect/platform-node/NodeContext"
import { ConfigProvider, Effect, Either, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, it } from "vitest"
import { decodeToml } from "../src/config/decode.js"
import { Paths } from "../src/config/Paths.js"
import { OrgSchema } from "../src/config/schema.js"
import { fleetSqlLayer } from "../src/fleet/connect.js"
import { migrate } from "../src/fleet/migrations.js"
import { fleetTaskStore } from "../src/fleet/taskStore.js"
import { Files } from "../src/fs/Files.js"
import type { TaskRecord } from "../src/task/TaskRecord.js"
import { TaskStore } from "../src/task/TaskStore.js"
import { Vault } from "../src/vault/Vault.js"
import { addViaApi, engineEvents } from "../test/support/control.js"
import { type Deployment, makeDeployment } from "../test/support/deployment.js"
import { type Postgres, startPostgres } from "../test/support/postgres.js"
import { emit, percentile, quick, smoke } from "./support.js"

const TASKS = smoke ? 4 : quick ? 12 : 40
const CLAIMS = smoke ? 60 : quick ? 150 : 600
const IDLE_S = smoke ? 4 : quick ? 10 : 30

/** The container starts of every box the engine reports, by task id (the moment the engine says so). */
const watchStarts = async () => {
  const starts = new Map<string, number>()
  const events = await engineEvents(["start"], (e) => {
    const task = e.labels["roster.task-id"]
    if (task) starts.set(task, e.at)
  })
  return { starts, close: events.close }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Task add → box started, one task at a time (each ends at once), so each is claimed the moment it is added. */
const addToStart = async (add: Deployment, workers: ReadonlyArray<string>) => {
  const watch = await watchStarts()
  const out: Array<number> = []
  try {
    for (let i = 0; i < TASKS; i++) {
      const at = performance.timeOrigin + performance.now()
      const id = await addViaApi(add, workers[i % workers.length]!, "!true")
      const deadline = Date.now() + 30_000
      while (!watch.starts.has(id) && Date.now() < deadline) await sleep(5)
      const started = watch.starts.get(id)
      if (started === undefined) throw new Error(`task ${id}: no box started in 30 s`)
      out.push(started - at)
      // Its box over before the next (the next then finds a free slot and an idle worker).
      await sleep(600)
    }
  } finally {
    watch.close()
  }
  return out
}

const daemonPid = (d: Deployment) => (JSON.parse(fs.readFileSync(d.file("state", "gateway.json"), "utf8")) as { pid: number }).pid
const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) / 1024
const cpuTicks = (pid: number) => {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
  return Number(fields[11]) + Number(fields[12])
}

/** An idle daemon's RSS (MB, the last sample) and CPU (share of one core) over `seconds`. */
const idle = async (pids: ReadonlyArray<number>, seconds: number) => {
  const ticks0 = pids.map(cpuTicks)
  await sleep(seconds * 1000)
  return pids.map((pid, i) => ({ rss: rssMb(pid), cpu: (cpuTicks(pid) - ticks0[i]!) / 100 / seconds }))
}

describe("a fleet on Postgres against one machine on files", () => {
  let pg: Postgres
  const shared = fs.mkdtempSync(path.join(os.tmpdir(), "roster-bench-shared-"))
  let single: Deployment
  const fleet: Array<Deployment> = []
  const workers = Array.from({ length: 4 }, (_, i) => `f${i}`)
  const addWorkers = (d: Deployment) => {
    for (const w of workers) {
      fs.mkdirSync(d.file("config", "workers", w), { recursive: true })
      fs.writeFileSync(d.file("config", "workers", w, "identity.md"), `You are ${w}.\n`)
    }
  }

  beforeAll(async () => {
    pg = await startPostgres()
    single = await makeDeployment("", undefined, undefined, { start: false })
    addWorkers(single)
    const cluster = `[cluster]\ndatabase = "${pg.url}"\nshared_data = "${shared}"\n`
    for (const name of ["b1", "b2", "b3"]) {
      const d = await makeDeployment(cluster, undefined, undefined, { env: { ROSTER_NODE: name, PGPASSWORD: pg.password }, start: false })
      addWorkers(d)
      fleet.push(d)
    }
    for (const d of [single, ...fleet]) {
      const started = await d.roster(["server", "start"])
      if (started.code !== 0) throw new Error(`server start: ${started.stdout}${started.stderr}`)
    }
  }, 300_000)

  afterAll(async () => {
    for (const d of [single, ...fleet]) await d?.stop().catch(() => undefined)
    pg?.remove()
    fs.rmSync(shared, { recursive: true, force: true })
  })

  it("task add → box started: one node on files, three on Postgres", async () => {
    const alone = await addToStart(single, workers)
    const three = await addToStart(fleet[0]!, workers)
    for (const p of [50, 99] as const) {
      const a = percentile(alone, p)
      const f = percentile(three, p)
      emit({ metric: `fleet: task add → box started, p${p}`, roster: f, baseline: a, unit: "ms", compare: "added", goal: "≤ +100 ms", pass: f - a <= 100 })
    }
  }, 600_000)

  it("an idle node's cost of being in a fleet: RSS and CPU against the same daemon alone", async () => {
    await sleep(3000)
    const [alone, node] = await idle([daemonPid(single), daemonPid(fleet[0]!)], IDLE_S)
    emit({ metric: "fleet: an idle node's RSS", roster: node!.rss, baseline: alone!.rss, unit: "MB", compare: "added", goal: "≤ +20 MB", pass: node!.rss - alone!.rss <= 20 })
    emit({
      metric: "fleet: an idle node's CPU (share of a core)",
      roster: node!.cpu * 100,
      baseline: alone!.cpu * 100,
      unit: "%",
      compare: "added",
      goal: "≤ +1 %",
      pass: (node!.cpu - alone!.cpu) * 100 <= 1
    })
  }, 120_000)
})

// The claim with the task stores alone: three nodes' stores and nothing else on the database (no
// daemon listening and passing its queue at each claim's NOTIFY, which the rows above need).
describe("the fleet's claim: three nodes' task stores over one Postgres, no daemons", () => {
  let pg: Postgres
  const shared = fs.mkdtempSync(path.join(os.tmpdir(), "roster-bench-claims-shared-"))

  beforeAll(async () => {
    pg = await startPostgres()
    const { org, password, root } = claimStores("roster-bench-migrate-")
    await Effect.runPromise(migrate.pipe(Effect.provide(fleetSqlLayer(org.cluster!).pipe(Layer.provide(Vault.layerTest({})))), Effect.provide(password)))
    fs.rmSync(root, { recursive: true, force: true })
  }, 120_000)

  afterAll(() => {
    pg?.remove()
    fs.rmSync(shared, { recursive: true, force: true })
  })

  /** Task stores of nodes over the fleet's Postgres, each with its own folders under a fresh root (the stores alone, no daemon). */
  const claimStores = (prefix: string) => {
    const org = Either.getOrThrow(decodeToml(OrgSchema, "org.toml", `[cluster]\ndatabase = "${pg.url}"\nshared_data = "${shared}"\n`))
    const root = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
    const files = (name: string) => {
      const home = path.join(root, name)
      return Layer.mergeAll(Paths.layerAt({ config: path.join(home, "config"), data: path.join(home, "data"), state: path.join(home, "state"), home }), Files.layer, NodeContext.layer)
    }
    const password = Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["PGPASSWORD", pg.password]])))
    const fleetStore = (node: string) =>
      fleetTaskStore(node, "bench").pipe(
        Layer.provide(fleetSqlLayer(org.cluster!, { maxConnections: 4 }).pipe(Layer.provide(Vault.layerTest({})))),
        Layer.provide(files(node)),
        Layer.provide(password)
      )
    return { files, fleetStore, org, password, root }
  }

  it("claims per second: three nodes' task stores over one Postgres, against one machine's file store", async () => {
    const { files, fleetStore, root } = claimStores("roster-bench-claims-")
    let n = 0
    /** Claims and ends every queued task it can, two at a time, until none is left; each claim as the supervisor makes it. */
    const drain = Effect.gen(function*() {
      const store = yield* TaskStore
      const one = (t: TaskRecord) =>
        Effect.gen(function*() {
          const run = `2026-12-02-00-00-00-${(n++).toString(16).padStart(8, "0")}`
          const claimed = yield* store.update(t.task_id, (x) => (x.status === "queued" ? { ...x, status: "running", run_ids: [...x.run_ids, run] } : x))
          if (claimed.status === "running" && claimed.run_ids.at(-1) === run) yield* store.update(t.task_id, (x) => ({ ...x, status: "done" }))
        })
      for (;;) {
        const all = yield* store.list
        const queued = all.filter((t) => t.status === "queued")
        if (queued.length === 0) return
        const busy = new Set(all.filter((t) => t.status === "running").map((t) => t.worker))
        const pick = queued.filter((t, i) => !busy.has(t.worker) && queued.findIndex((x) => x.worker === t.worker) === i).slice(0, 2)
        yield* Effect.forEach(pick, one, { concurrency: 2, discard: true })
        if (pick.length === 0) yield* Effect.sleep("2 millis")
      }
    })
    const add = Effect.flatMap(TaskStore, (s) =>
      Effect.forEach(Array.from({ length: CLAIMS }, (_, i) => i), (i) =>
        s.add({ worker: `c${i % 20}`, prompt: "p", ceilingMin: null, after: null, origin: { by: "person", run_id: null, task_id: null } }), { discard: true }))
    const time = async (run: () => Promise<unknown>) => {
      const t0 = performance.now()
      await run()
      return (performance.now() - t0) / 1000
    }
    await Effect.runPromise(Effect.provide(add, TaskStore.layer.pipe(Layer.provide(files("alone")))))
    const alone = CLAIMS / await time(() => Effect.runPromise(Effect.provide(drain, TaskStore.layer.pipe(Layer.provide(files("alone")))) as Effect.Effect<void>))
    await Effect.runPromise(Effect.provide(add, fleetStore("c1")) as Effect.Effect<void>)
    const three = CLAIMS / await time(() => Promise.all(["c1", "c2", "c3"].map((node) => Effect.runPromise(Effect.provide(drain, fleetStore(node)) as Effect.Effect<void>))))
    emit({ metric: "fleet: claims per second, 3 nodes over one Postgres", roster: three, baseline: alone, unit: "/s", compare: "ratio", goal: "reported", pass: true, reported: true })
    fs.rmSync(root, { recursive: true, force: true })
  }, 600_000)

  it("the claim itself: three nodes claiming from 10,000 queued tasks over 200 workers — the one statement against the read-and-update path", async () => {
    const QUEUED = smoke ? 300 : quick ? 2000 : 10_000
    const WORKERS = smoke ? 20 : 200
    // The read-and-update path is measured over the first claims only (each of its passes reads the queue).
    const OLD_CLAIMS = smoke ? 60 : quick ? 300 : 1000
    const { fleetStore, root } = claimStores("roster-bench-claim-")
    const fill = async () => {
      pg.sql("DELETE FROM roster_tasks")
      await Effect.runPromise(Effect.provide(Effect.flatMap(TaskStore, (st) =>
        st.addAll(Array.from({ length: QUEUED }, (_, i) => ({
          worker: `w${i % WORKERS}`, prompt: "p", ceilingMin: null, after: null, origin: { by: "person" as const, run_id: null, task_id: null }
        })), () => undefined)), fleetStore("filler")) as Effect.Effect<unknown>)
      // The filler's writes out of the way of what is measured.
      pg.sql("VACUUM ANALYZE roster_tasks")
    }
    let n = 0
    const runId = () => `2026-12-03-00-00-00-${(n++).toString(16).padStart(8, "0")}`
    /** Each claim's latency, and how many a node made, until `enough` claims were made by all. */
    const claimLoop = (claim: Effect.Effect<TaskRecord | undefined, unknown, TaskStore>, enough: () => boolean, latencies: Array<number>) =>
      Effect.gen(function*() {
        const store = yield* TaskStore
        while (!enough()) {
          const t0 = performance.now()
          const t = yield* claim
          latencies.push(performance.now() - t0)
          if (!t) return
          // The run is over at once: its worker is free for the next claim.
          yield* store.update(t.task_id, (x) => ({ ...x, status: "done" }))
        }
      })
    const statement = Effect.flatMap(TaskStore, (st) => st.claimNext!({ busy: [], runId: runId() }))
    const readAndUpdate = Effect.gen(function*() {
      const store = yield* TaskStore
      const all = yield* store.list
      const busy = new Set(all.filter((t) => t.status === "running").map((t) => t.worker))
      for (const t of all) {
        if (t.status !== "queued" || busy.has(t.worker)) continue
        const run = runId()
        const claimed = yield* store.update(t.task_id, (x) => (x.status === "queued" ? { ...x, status: "running", run_ids: [...x.run_ids, run] } : x))
        if (claimed.status === "running" && claimed.run_ids.at(-1) === run) return claimed
      }
      return undefined
    })
    /** Three nodes' stores in this process, claiming at once until `total` claims were made. */
    const measure = async (mode: "claim" | "read-and-update", total: number) => {
      await fill()
      const latencies: Array<number> = []
      const t0 = performance.now()
      await Promise.all(["k1", "k2", "k3"].map((node) =>
        Effect.runPromise(Effect.provide(claimLoop(mode === "claim" ? statement : readAndUpdate, () => latencies.length >= total, latencies), fleetStore(node)) as Effect.Effect<void>)))
      const seconds = (performance.now() - t0) / 1000
      return { perSecond: latencies.length / seconds, p99: percentile(latencies, 99) }
    }
    const old = await measure("read-and-update", OLD_CLAIMS)
    const now = await measure("claim", QUEUED)
    emit({ metric: `fleet: claims per second, 3 nodes, ${QUEUED} queued over ${WORKERS} workers`, roster: now.perSecond, baseline: old.perSecond, unit: "/s", compare: "ratio", goal: "≥ 500/s", pass: now.perSecond >= 500 })
    emit({ metric: "fleet: one claim's latency, p99", roster: now.p99, baseline: old.p99, unit: "ms", compare: "ratio", goal: "≤ 50 ms", pass: now.p99 <= 50 })
    fs.rmSync(root, { recursive: true, force: true })
  }, 900_000)
})
