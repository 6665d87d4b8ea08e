// Where a claim's time goes: the statement alone, then claimNext as the store makes it (with its announce).
import * as NodeContext from "@effect/platform-node/NodeContext"
import { SqlClient } from "@effect/sql/SqlClient"
import { ConfigProvider, Effect, Either, Layer } from "effect"
import * as fs from "node:fs"
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
const sqlL = fleetSqlLayer(org.cluster!).pipe(Layer.provide(Vault.layerTest({})), Layer.provide(password))
const files = Layer.mergeAll(Paths.layerAt({ config: path.join(root, "c"), data: path.join(root, "d"), state: path.join(root, "s"), home: root }), Files.layer, NodeContext.layer)
const store = fleetTaskStore("p1", "prof").pipe(Layer.provideMerge(sqlL), Layer.provide(files))
await Effect.runPromise(migrate.pipe(Effect.provide(sqlL)) as Effect.Effect<unknown>)
const N = Number(process.env.N ?? 10000)
await Effect.runPromise(Effect.provide(Effect.flatMap(TaskStore, (s) => s.addAll(Array.from({ length: N }, (_, i) => ({ worker: `w${i % 200}`, prompt: "p", ceilingMin: null, after: null, origin: { by: "person" as const, run_id: null, task_id: null } })), () => undefined)), store) as Effect.Effect<unknown>)
let n = 0
const times: Array<number> = []
await Effect.runPromise(Effect.provide(Effect.gen(function*() {
  const s = yield* TaskStore
  const sql = yield* SqlClient
  for (let i = 0; i < 300; i++) {
    const t0 = performance.now()
    const t = yield* s.claimNext!({ busy: [], runId: `2026-12-03-00-00-00-${(n++).toString(16).padStart(8, "0")}` })
    times.push(performance.now() - t0)
    yield* sql`UPDATE roster_tasks SET status = 'done' WHERE task_id = ${t!.task_id}`
  }
  const plan = yield* sql`EXPLAIN ANALYZE SELECT q.task_id FROM roster_tasks q WHERE q.status = 'queued' AND NOT EXISTS (SELECT 1 FROM roster_tasks r WHERE r.worker = q.worker AND r.status = 'running') ORDER BY q.seq FOR UPDATE SKIP LOCKED LIMIT 1`
  console.log(plan.map((r) => Object.values(r)[0]).join("\n"))
}), store) as Effect.Effect<unknown>)
times.sort((a, b) => a - b)
console.log(`claimNext p50 ${times[150]?.toFixed(1)} ms p99 ${times[296]?.toFixed(1)} ms`)
pg.remove()
process.exit(0)
