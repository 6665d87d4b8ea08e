// The spike issue 26 asks for before the fleet's queue is built: roster's workload on Effect's own
// engine (@effect/cluster on Postgres, each worker an entity, each task a persisted message) —
// three runner processes on this machine, one real Postgres, a node limit of 2 boxes at once.
// Run: npx tsx bench/spikes/clusterPlacement.ts   (prints the figures docs/SCALE-OUT.md quotes)
import { ClusterSchema, Entity } from "@effect/cluster"
import { NodeClusterSocket } from "@effect/platform-node"
import { Rpc } from "@effect/rpc"
import { SqlClient } from "@effect/sql/SqlClient"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Option, Redacted, Schema } from "effect"
import { spawn } from "node:child_process"
import { RunnerAddress } from "@effect/cluster"
import { startPostgres } from "../../test/support/postgres.js"

const Run = Rpc.make("Run", {
  payload: { task: Schema.String, ms: Schema.Number },
  success: Schema.String,
  primaryKey: (p) => p.task
}).annotate(ClusterSchema.Persisted, true)

/** A worker: one message at a time, as roster runs one box of a worker at a time. */
const Worker = Entity.make("Worker", [Run])

const pgLayer = (port: number, password: string) =>
  PgClient.layer({ host: "127.0.0.1", port, database: "roster", username: "roster", password: Redacted.make(password) })

/** One runner: a node whose boxes are limited to `slots` at once (roster's [supervisor] concurrency). */
const runner = (name: string, listen: number, pgPort: number, password: string, slots: number) =>
  Effect.gen(function*() {
    const sem = yield* Effect.makeSemaphore(slots)
    const handlers = Worker.toLayer(Effect.gen(function*() {
      const address = yield* Entity.CurrentAddress
      const sql = yield* SqlClient
      return {
        Run: ({ payload }) =>
          sem.withPermits(1)(Effect.gen(function*() {
            // Each delivery is an attempt (a box, in roster): how many a task got, where, and how each ended.
            const [row] = yield* sql<{ readonly id: number }>`INSERT INTO spike_runs (task, worker, node, started_at)
              VALUES (${payload.task}, ${address.entityId}, ${name}, clock_timestamp()) RETURNING id`
            yield* Effect.sleep(payload.ms).pipe(
              Effect.onInterrupt(() => sql`UPDATE spike_runs SET ended_at = clock_timestamp(), how = 'interrupted' WHERE id = ${row!.id}`.pipe(Effect.ignore))
            )
            yield* sql`UPDATE spike_runs SET ended_at = clock_timestamp(), how = 'done' WHERE id = ${row!.id}`
            return name
          })).pipe(Effect.orDie)
      }
    }))
    const cluster = NodeClusterSocket.layer({
      storage: "sql",
      shardingConfig: {
        runnerAddress: Option.some(RunnerAddress.make("127.0.0.1", listen)),
        entityMessagePollInterval: "500 millis",
        refreshAssignmentsInterval: "1 second"
      }
    })
    return yield* Layer.launch(handlers.pipe(Layer.provide(cluster), Layer.provide(pgLayer(pgPort, password))))
  })

const drive = Effect.gen(function*() {
  const pg = yield* Effect.acquireRelease(Effect.promise(() => startPostgres()), (p) => Effect.sync(() => p.remove()))
  pg.sql("CREATE TABLE spike_runs (id serial PRIMARY KEY, task text, worker text, node text, started_at timestamptz, ended_at timestamptz, how text)")
  const procs = ["n1", "n2", "n3"].map((name, i) =>
    spawn(process.execPath, [...process.execArgv, process.argv[1]!, "runner", name, String(34_000 + i), String(pg.port), pg.password], { stdio: "inherit" }))
  yield* Effect.addFinalizer(() => Effect.sync(() => procs.forEach((p) => p.kill("SIGKILL"))))
  yield* Effect.sleep("8 seconds")
  // 20 workers, 3 tasks each, 2 s a task: 120 box-seconds over 3 nodes of 2 slots is 20 s at best.
  const tasks = Array.from({ length: 60 }, (_, i) => ({ worker: `w${i % 20}`, task: `t${i}` }))
  const started = Date.now()
  yield* Effect.gen(function*() {
    const client = yield* Worker.client
    yield* Effect.forEach(tasks, (t) => client(t.worker).Run({ task: t.task, ms: 2000 }, { discard: true }), { concurrency: 10 })
  }).pipe(
    Effect.provide(NodeClusterSocket.layer({ clientOnly: true, storage: "sql" }).pipe(Layer.provide(pgLayer(pg.port, pg.password)))),
    Effect.scoped
  )
  const deadline = Date.now() + 120_000
  while (Date.now() < deadline && Number(pg.sql("SELECT count(DISTINCT task) FROM spike_runs WHERE how = 'done'")) < tasks.length) {
    yield* Effect.sleep("500 millis")
  }
  const wall = (Date.now() - started) / 1000
  console.log(`${pg.sql("SELECT count(DISTINCT task) FROM spike_runs WHERE how = 'done'")} of ${tasks.length} tasks done in ${wall.toFixed(1)} s (20 s at best)`)
  console.log("attempts: how they ended | count")
  console.log(pg.sql("SELECT coalesce(how, 'still running') , count(*) FROM spike_runs GROUP BY 1 ORDER BY 1"))
  console.log("tasks started more than once (a second box, in roster) | tasks done more than once:")
  console.log(pg.sql("SELECT (SELECT count(*) FROM (SELECT task FROM spike_runs GROUP BY task HAVING count(*) > 1) x), (SELECT count(*) FROM (SELECT task FROM spike_runs WHERE how = 'done' GROUP BY task HAVING count(*) > 1) y)"))
  console.log("node | attempts | workers:")
  console.log(pg.sql("SELECT node, count(*) AS tasks, count(DISTINCT worker) AS workers FROM spike_runs GROUP BY node ORDER BY node"))
  console.log("each node's busy span (first start to last end):")
  console.log(pg.sql("SELECT node, round(extract(epoch FROM max(ended_at) - min(started_at))::numeric, 1) FROM spike_runs GROUP BY node ORDER BY node"))
  console.log("overlapping runs of one worker (must be 0):")
  console.log(pg.sql("SELECT count(*) FROM spike_runs a JOIN spike_runs b ON a.worker = b.worker AND a.id < b.id AND a.started_at < b.ended_at AND b.started_at < a.ended_at"))
})

if (process.argv[2] === "runner") {
  const [, , , name, listen, pgPort, password] = process.argv
  Effect.runFork(runner(name!, Number(listen), Number(pgPort), password!, 2))
} else {
  Effect.runPromise(Effect.scoped(drive)).then(() => process.exit(0), (e) => {
    console.error(e)
    process.exit(1)
  })
}
