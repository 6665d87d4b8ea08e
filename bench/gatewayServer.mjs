#!/usr/bin/env node
// The gateway alone in a process of its own (the built library, dist/src), for the gateway bench:
// its CPU is its own, as the daemon's is. Prints its port, then serves until stdin closes.
// argv: <roster home> <token> ; the deployment's org.toml and identity file are the bench's.
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect, Layer } from "effect"
import { Audit, Dialer, Files, HostGit, LiveRuns, MemoryStore, OrgConfig, Paths, RunFence, RunLog, serveGateway, SpendLedger, TaskStore, Vault } from "../dist/src/index.js"
import { makeDockerTest } from "../dist/src/testing.js"

const [home] = process.argv.slice(2)
const paths = { ...Paths.fromEnv({ ROSTER_HOME: home, HOME: home }), home }
const layer = Layer.mergeAll(
  OrgConfig.layer, Vault.layerTest({ anthropic: { type: "api_key", key: "sk-ant-bench-not-real" } }), Dialer.layer,
  LiveRuns.layerTest(() => true), Audit.layer, RunLog.layer, TaskStore.layer, MemoryStore.layer, RunFence.layerNone, SpendLedger.layer
).pipe(Layer.provideMerge(Layer.mergeAll(NodeContext.layer, Files.layer, HostGit.layer, Paths.layerAt(paths), makeDockerTest())))

// Each run an identity file names has its record, as a live run's has: the gateway notes its model answers' usage there.
const runRecords = Effect.gen(function*() {
  const dir = path.join(home, "state", "identity")
  const runLog = yield* RunLog
  for (const f of fs.existsSync(dir) ? fs.readdirSync(dir) : []) {
    const id = JSON.parse(fs.readFileSync(path.join(dir, f), "utf8"))
    if (id.run_id && id.worker) yield* runLog.start({ runId: id.run_id, worker: id.worker, kind: "box" })
  }
})

const program = Effect.gen(function*() {
  yield* runRecords
  const { port } = yield* serveGateway({ addrs: ["127.0.0.1"], port: 0 })
  process.stdout.write(`${port}\n`)
  yield* Effect.async((resume) => {
    process.stdin.on("end", () => resume(Effect.void))
    process.stdin.on("close", () => resume(Effect.void))
    process.stdin.resume()
  })
}).pipe(Effect.scoped, Effect.provide(layer))
Effect.runPromise(program).then(() => process.exit(0), (e) => {
  console.error(e)
  process.exit(1)
})
