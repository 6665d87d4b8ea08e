import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { validateWorkerName } from "../config/names.js"
import { type MemoryEntry, MemoryStore, newestFirst } from "../memory/MemoryStore.js"
import { readIdentity } from "../worker/workers.js"
import { promptLine } from "../contract/promptText.js"
import { visible } from "./terminal.js"

const json = Options.boolean("json").pipe(Options.withDescription("print JSON for scripts"))
const workerArg = Args.text({ name: "worker" }).pipe(Args.withDescription("whose memory"))
const entryArg = Args.text({ name: "entry-id" }).pipe(Args.withDescription("an entry id from roster memory list (m-xxxxxxxx)"))

/** Who a person is, in the memory log (who forgot or accepted an entry). */
const person = `person ${process.env.USER ?? "unknown"}`

const known = (worker: string) => validateWorkerName(worker).pipe(Effect.zipRight(readIdentity(worker)))

/** One entry as `roster memory list` prints it: one line, whatever its text holds (promptLine). */
export const entryLine = (e: MemoryEntry) =>
  `${e.id}  ${e.time.slice(0, 19).replace("T", " ")}  ${e.scope.padEnd(14)} ${e.pending ? "PENDING " : ""}${promptLine(e.text)}` +
    `${e.run_id ? `  (run ${e.run_id})` : ""}${e.held_reason ? `  held: ${visible(e.held_reason)}` : ""}`

const list = Command.make("list", {
  json,
  worker: workerArg,
  scope: Options.text("scope").pipe(Options.optional, Options.withDescription(`only this scope: "worker" or "channel:<name>"`))
}, ({ json, scope, worker }) =>
  Effect.gen(function*() {
    yield* known(worker)
    const all = newestFirst(yield* (yield* MemoryStore).list(worker))
    const entries = Option.isSome(scope) ? all.filter((e) => e.scope === scope.value) : all
    if (json) return yield* Console.log(JSON.stringify(entries, null, 2))
    if (entries.length === 0) return yield* Console.log(`${worker} remembers nothing${Option.isSome(scope) ? ` in ${scope.value}` : ""} yet (a run keeps notes with the remember tool)`)
    for (const e of entries) yield* Console.log(entryLine(e))
    const pending = entries.filter((e) => e.pending).length
    if (pending > 0) yield* Console.log(`${pending} pending: written by a tainted run, not briefed until accepted — roster memory accept ${worker} <entry-id>`)
  })).pipe(Command.withDescription(
    "List what a worker remembers, newest first: id, time, scope, and the note (PENDING: written by a tainted run, held for review). " +
      "Example: roster memory list alice --scope worker"
  ))

const forget = Command.make("forget", { worker: workerArg, entry: entryArg }, ({ entry, worker }) =>
  Effect.gen(function*() {
    yield* known(worker)
    const gone = yield* (yield* MemoryStore).forget(worker, entry, person)
    yield* Console.log(`${worker} forgot ${gone.id}: ${promptLine(gone.text)}`)
  })).pipe(Command.withDescription("Remove an entry from a worker's memory: its later runs are no longer briefed with it. Example: roster memory forget alice m-1a2b3c4d"))

const accept = Command.make("accept", { worker: workerArg, entry: entryArg }, ({ entry, worker }) =>
  Effect.gen(function*() {
    yield* known(worker)
    const ok = yield* (yield* MemoryStore).accept(worker, entry, person)
    yield* Console.log(`${worker}'s ${ok.id} accepted: briefed from the next run on`)
  })).pipe(Command.withDescription(
    "Accept a pending entry (written by a tainted run): a person read it and lets the worker be briefed with it. Example: roster memory accept alice m-1a2b3c4d"
  ))

export const memoryCommand = Command.make("memory").pipe(
  Command.withDescription(
    "What a worker remembers between runs: notes its runs keep with the remember tool (host-side, never in a box), briefed at each run's start."
  ),
  Command.withSubcommands([list, forget, accept])
)
