import type { SqlClient } from "@effect/sql/SqlClient"
import { Context, Effect, Layer } from "effect"
import { OrgConfig } from "../config/OrgConfig.js"
import { Paths } from "../config/Paths.js"
import { TaskStoreError } from "../task/TaskRecord.js"
import { TaskStore } from "../task/TaskStore.js"
import { fleetSqlLayer, whereOf } from "./connect.js"
import { fleetTaskStore } from "./taskStore.js"

const FIX = "check that the database answers: roster doctor"

/** What the store and its connection need of the process: its files, and the vault for the database's password. */
type Needs = Exclude<Layer.Layer.Context<ReturnType<typeof fleetTaskStore>>, SqlClient> | Layer.Layer.Context<ReturnType<typeof fleetSqlLayer>>

/**
 * A fleet node's task store for a process that is not its daemon (`roster task` while the daemon
 * is down): the fleet's queue in its database, connected on first use — never this machine's
 * files, which no node of a fleet reads (a task queued there would never run). A command that
 * never touches tasks never waits for the database.
 */
export const fleetTaskStoreOnDemand = Layer.scoped(
  TaskStore,
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const org = yield* OrgConfig
    const env = yield* Effect.context<Needs>()
    const node = (yield* Paths).fleet?.node ?? "?"
    const connect = Effect.gen(function*() {
      const o = yield* org.snapshot.pipe(Effect.mapError((e) => new TaskStoreError({ file: "org.toml", detail: e.message, fix: "roster doctor names the error" })))
      const cluster = o.cluster
      if (!cluster) return yield* new TaskStoreError({ file: "org.toml", detail: "it has no [cluster]", fix: "restore [cluster] in org.toml" })
      const where = whereOf(cluster)
      const layer = fleetTaskStore(node, where).pipe(Layer.provide(fleetSqlLayer(cluster, { maxConnections: 2 })))
      const ctx = yield* Layer.buildWithScope(layer, scope).pipe(
        Effect.mapError((e) => new TaskStoreError({ file: where, detail: e.message, fix: FIX }))
      )
      return Context.get(ctx, TaskStore)
    }).pipe(Effect.provide(env))
    const store = yield* Effect.cached(connect)
    // get and list promise no error: a database that cannot be reached ends the command with the fix.
    const orDie = <A>(f: (s: Context.Tag.Service<TaskStore>) => Effect.Effect<A>) =>
      Effect.flatMap(Effect.orDieWith(store, (e) => new Error(e.message)), f)
    return {
      add: (task) => Effect.flatMap(store, (s) => s.add(task)),
      addAll: (tasks, admit) => Effect.flatMap(store, (s) => s.addAll(tasks, admit)),
      get: (taskId) => orDie((s) => s.get(taskId)),
      list: orDie((s) => s.list),
      update: (taskId, f) => Effect.flatMap(store, (s) => s.update(taskId, f))
    }
  })
)
