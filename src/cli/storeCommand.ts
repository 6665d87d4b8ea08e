import { Args, Command, Options } from "@effect/cli"
import { Console, Effect } from "effect"
import { snapshotInfos } from "../box/store.js"
import { validateWorkerName } from "../config/names.js"
import { restoreStore } from "../supervisor/storeCare.js"

const json = Options.boolean("json").pipe(Options.withDescription("print JSON for scripts"))
const workerArg = Args.text({ name: "worker" }).pipe(Args.withDescription("whose store (/pihome/store in the worker's boxes)"))

const list = Command.make("list", { json, worker: workerArg }, ({ json, worker }) =>
  Effect.gen(function*() {
    yield* validateWorkerName(worker)
    const snapshots = yield* snapshotInfos(worker)
    if (json) return yield* Console.log(JSON.stringify(snapshots, null, 2))
    if (snapshots.length === 0) return yield* Console.log(`${worker} has no store snapshots yet (one is taken after each run that changed the store)`)
    for (const s of snapshots) {
      const from = s.taken_by === "run" ? `after run ${s.run_id}` : s.taken_by === "restore" ? "before a restore" : "daemon sweep"
      yield* Console.log(`${s.id}  ${s.time || "-"}  ${String(s.changes).padStart(5)} change${s.changes === 1 ? " " : "s"}  ${from}`)
    }
  })).pipe(Command.withDescription(
    "List a worker's store snapshots, oldest first: id, time, how many entries changed since the one before, and what took it. " +
      "Example: roster store list alice"
  ))

const restore = Command.make("restore", {
  worker: workerArg,
  snapshot: Args.text({ name: "snapshot" }).pipe(Args.withDescription("the snapshot id, as roster store list shows it"))
}, ({ snapshot, worker }) =>
  Effect.gen(function*() {
    const done = yield* restoreStore(worker, snapshot)
    yield* Console.log(`store of ${worker} restored from ${done.restored}${done.saved ? ` (the store it replaced is snapshot ${done.saved.split("/").at(-1)})` : ""}`)
  })).pipe(Command.withDescription(
    "Put a snapshot back as the worker's store. The current store is snapshotted first, so a restore can be undone; " +
      "refused while a box of that worker runs. Example: roster store restore alice 2026-11-29-10-00-00-0a1b2c3d"
  ))

export const storeCommand = Command.make("store").pipe(
  Command.withDescription("A worker's durable store (/pihome/store): its snapshots, and putting one back."),
  Command.withSubcommands([list, restore])
)
