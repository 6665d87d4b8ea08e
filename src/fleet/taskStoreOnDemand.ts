import { SqlClient } from "@effect/sql/SqlClient"
import { Context, Effect, Layer } from "effect"
import { Paths } from "../config/Paths.js"
import { TaskStoreError } from "../task/TaskRecord.js"
import { TaskStore } from "../task/TaskStore.js"
import { FleetSqlOnDemand } from "./firstUse.js"
import { fleetTaskStore } from "./taskStore.js"

/** What the store needs of the process besides its database: its files. */
type Needs = Exclude<Layer.Layer.Context<ReturnType<typeof fleetTaskStore>>, SqlClient>

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
    const env = yield* Effect.context<Needs>()
    const node = (yield* Paths).fleet?.node ?? "?"
    const connected = yield* FleetSqlOnDemand
    const store = yield* Effect.cached(Effect.gen(function*() {
      const { sql, where } = yield* Effect.mapError(connected, (e) => new TaskStoreError({ file: "the fleet's database", detail: e.detail, fix: e.fix }))
      // Interruptible wherever the first use comes from (see FleetSqlOnDemand): its fibers must end with the process.
      const ctx = yield* Effect.interruptible(Layer.buildWithScope(fleetTaskStore(node, where).pipe(Layer.provide(Layer.succeed(SqlClient, sql))), scope))
      return Context.get(ctx, TaskStore)
    }).pipe(Effect.provide(env)))
    // get and list promise no error: a database that cannot be reached ends the command with the fix.
    const orDie = <A>(f: (s: Context.Tag.Service<TaskStore>) => Effect.Effect<A>) =>
      Effect.flatMap(Effect.orDieWith(store, (e) => new Error(e.message)), f)
    return {
      add: (task) => Effect.flatMap(store, (s) => s.add(task)),
      addAll: (tasks, admit) => Effect.flatMap(store, (s) => s.addAll(tasks, admit)),
      get: (taskId) => orDie((s) => s.get(taskId)),
      list: orDie((s) => s.list),
      archive: (before) => Effect.flatMap(store, (s) => s.archive(before)),
      getArchived: (taskId) => Effect.flatMap(store, (s) => s.getArchived(taskId)),
      listArchived: Effect.flatMap(store, (s) => s.listArchived),
      update: (taskId, f) => Effect.flatMap(store, (s) => s.update(taskId, f))
    }
  })
)
