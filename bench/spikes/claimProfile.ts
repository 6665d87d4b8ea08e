// Where a claim's time goes: three nodes' stores in one process, each claiming and ending tasks
// as the bench's claim row does (claimNext, then store.update to done), from N queued over 200
// workers. Run: npx tsx bench/spikes/claimProfile.ts (N=2000 by default; PROF=<file> for a CPU profile of the
// claims alone; PG_EXTRA_OPTS="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track_planning=on"
// for the database's own time a statement, planning and running).
import * as NodeContext from "@effect/platform-node/NodeContext"
import { ConfigProvider, Effect, Either, Layer } from "effect"
import * as fs from "node:fs"
import * as inspector from "node:inspector/promises"
import * as os from "node:os"
import * as path from "node:path"
import { decodeToml } from "../../src/config/decode.js"
import { Paths } from "../../src/config/Paths.js"
import { OrgSchema } from "../../src/config/schema.js"
import { fleetSqlLayer } from "../../src/fleet/connect.js"
import { migrate } from "../../src/fleet/migrations.js"
import { fleetTaskStore } from "../../src/fleet/taskStore.js"
import { Files } from "../../src/fs/Files.js"
import { TaskStore } from "../../src/task/TaskStore.js"
import { Vault } from "../../src/vault/Vault.js"
import { startPostgres } from "../../test/support/postgres.js"

const pg = await startPostgres()
const root = fs.mkdtempSync(path.join(os.tmpdir(), "claimprof-"))
const org = Either.getOrThrow(decodeToml(OrgSchema, "org.toml", `[cluster]\ndatabase = "${pg.url}"\nshared_data = "${root}"\n`))
const password = Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["PGPASSWORD", pg.password]])))
const sqlL = fleetSqlLayer(org.cluster!, { maxConnections: 4 }).pipe(Layer.provide(Vault.layerTest({})), Layer.provide(password))
const files = (name: string) =>
  Layer.mergeAll(Paths.layerAt({ config: path.join(root, name, "c"), data: path.join(root, name, "d"), state: path.join(root, name, "s"), home: root }), Files.layer, NodeContext.layer)
const store = (name: string) => fleetTaskStore(name, "prof").pipe(Layer.provide(sqlL), Layer.provide(files(name)))
await Effect.runPromise(migrate.pipe(Effect.provide(sqlL)) as Effect.Effect<unknown>)
if (process.env.PG_EXTRA_OPTS) pg.sql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
const N = Number(process.env.N ?? 2000)
await Effect.runPromise(Effect.provide(Effect.flatMap(TaskStore, (s) => s.addAll(Array.from({ length: N }, (_, i) => ({ worker: `w${i % 200}`, prompt: "p", ceilingMin: null, after: null, origin: { by: "person" as const, run_id: null, task_id: null } })), () => undefined)), store("filler")) as Effect.Effect<unknown>)
let n = 0
const times: Array<number> = []
const loop = Effect.gen(function*() {
  const s = yield* TaskStore
  while (times.length < N) {
    const t0 = performance.now()
    const t = yield* s.claimNext!({ busy: [], runId: `2026-12-03-00-00-00-${(n++).toString(16).padStart(8, "0")}` })
    times.push(performance.now() - t0)
    if (!t) return
    yield* s.update(t.task_id, (x) => ({ ...x, status: "done" }))
  }
})
// PROF=<file>: a CPU profile of the claims alone (not the start-up or the filling).
const session = process.env.PROF ? new inspector.Session() : undefined
session?.connect()
await session?.post("Profiler.enable")
await session?.post("Profiler.start")
if (process.env.PG_EXTRA_OPTS) pg.sql("SELECT pg_stat_statements_reset()")
const t0 = performance.now()
await Promise.all(["k1", "k2", "k3"].map((k) => Effect.runPromise(Effect.provide(loop, store(k)) as Effect.Effect<unknown>)))
const seconds = (performance.now() - t0) / 1000
if (session) fs.writeFileSync(process.env.PROF!, JSON.stringify((await session.post("Profiler.stop")).profile))
times.sort((a, b) => a - b)
console.log(`${times.length} claims in ${seconds.toFixed(2)} s: ${(times.length / seconds).toFixed(0)}/s; claimNext p50 ${times[Math.floor(times.length / 2)]?.toFixed(1)} ms p99 ${times[Math.floor(times.length * 0.99)]?.toFixed(1)} ms`)
if (process.env.PG_EXTRA_OPTS) {
  console.log(pg.sql("SELECT round(total_plan_time::numeric, 1) || ' ms plan ' || round(total_exec_time::numeric, 1) || ' ms ' || calls || ' calls ' || round((total_exec_time / calls)::numeric, 3) || ' ms/call  ' || left(regexp_replace(query, '\\s+', ' ', 'g'), 110) FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 4"))
}
pg.remove()
fs.rmSync(root, { recursive: true, force: true })
process.exit(0)
