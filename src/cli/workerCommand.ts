import { Args, Command, Options } from "@effect/cli"
import { FileSystem } from "@effect/platform"
import { Console, Effect, Option } from "effect"
import { Runner } from "../runner/Runner.js"
import { Paths, layout } from "../config/Paths.js"
import { colourOn } from "../report/terminal.js"
import { addWorker, listWorkers, readIdentity, readWorkerSettings } from "../worker/workers.js"
import { identityProblem, identitySummary } from "../worker/identityCheck.js"
import { writeAtomic } from "../fs/atomic.js"
import { OrgConfig } from "../config/OrgConfig.js"
import { BadInput } from "./badInput.js"
import { visible } from "../report/terminal.js"
import { spawn } from "node:child_process"
import { ExitCode } from "./exit.js"
import { pageOfRuns } from "../run/query.js"

const workerArg = Args.text({ name: "worker" }).pipe(Args.withDescription("the worker's name"))
const json = Options.boolean("json").pipe(Options.withDescription("print JSON for scripts"))

const add = Command.make("add", {
  worker: workerArg,
  identity: Options.file("identity", { exists: "yes" }).pipe(
    Options.optional,
    Options.withDescription("a Markdown file to use as the worker's identity.md (default: a short starter)")
  )
}, ({ identity, worker }) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const text = Option.isSome(identity) ? yield* fs.readFileString(identity.value) : undefined
    const dir = yield* addWorker(worker, text)
    yield* Console.log(`created worker ${worker}: ${dir}\nedit its identity.md to say who it is; run it with: roster worker run ${worker} "..."`)
  })).pipe(Command.withDescription("Add a worker: workers/<name>/identity.md (who it is) and worker.toml (model, snapshots)."))

const list = Command.make("list", { json }, ({ json }) =>
  Effect.gen(function*() {
    const names = yield* listWorkers
    if (json) return yield* Console.log(JSON.stringify(names))
    if (names.length === 0) return yield* Console.log("no workers yet — add one: roster worker add alice")
    for (const n of names) yield* Console.log(n)
  })).pipe(Command.withDescription("List the workers."))

const show = Command.make("show", { worker: workerArg, json }, ({ json, worker }) =>
  Effect.gen(function*() {
    const identity = yield* readIdentity(worker)
    const settings = yield* readWorkerSettings(worker)
    const { runs } = yield* pageOfRuns(0, 5, Option.some(worker))
    const dir = layout(yield* Paths).workerDir(worker)
    if (json) return yield* Console.log(JSON.stringify({ worker, dir, identity, settings, recent_runs: runs }, null, 2))
    yield* Console.log(`worker ${worker}  (${dir})`)
    yield* Console.log(`model: ${settings.model ?? "(pi's default)"}  thinking: ${settings.thinking ?? "(default)"}  store snapshots kept: ${settings.store.snapshots}`)
    yield* printIdentity(identity, layout(yield* Paths).identityMd(worker))
    yield* Console.log(runs.length === 0 ? "no runs yet" : "recent runs:")
    for (const r of runs) yield* Console.log(`  ${r.run_id}  ${r.ended_by ?? "running"}  exit ${r.exit_code ?? "-"}`)
  })).pipe(Command.withDescription("Show a worker's identity, settings and recent runs."))

/** An identity's first lines and its size, as a person checks it (the whole file is one path away). */
const printIdentity = (identity: string, file: string) =>
  Effect.gen(function*() {
    const s = identitySummary(identity)
    yield* Console.log(`\nidentity (${s.lines} line${s.lines === 1 ? "" : "s"}, ${s.characters} characters; ${file}):`)
    for (const l of s.head) yield* Console.log(`  ${visible(l)}`)
    if (s.more > 0) yield* Console.log(`  … ${s.more} more line${s.more === 1 ? "" : "s"}`)
    yield* Console.log("")
  })

/** Opens `file` in the person's editor ($VISUAL, else $EDITOR, else vi) on this terminal; its exit code. */
const openEditor = (file: string) =>
  Effect.async<number, BadInput>((resume) => {
    const editor = process.env.VISUAL || process.env.EDITOR || "vi"
    // Through a shell, so an editor given with its flags ("code -w") runs as the person wrote it.
    const child = spawn("sh", ["-c", `${editor} "$1"`, "sh", file], { stdio: "inherit" })
    child.once("error", (e) => resume(Effect.fail(new BadInput({ detail: `the editor (${editor}) could not start: ${e.message} — set EDITOR, or pass --identity-file F` }))))
    child.once("exit", (code) => resume(Effect.succeed(code ?? 1)))
    return Effect.sync(() => void child.kill())
  })

const edit = Command.make("edit", {
  worker: workerArg,
  identityFile: Options.file("identity-file", { exists: "yes" }).pipe(
    Options.optional,
    Options.withDescription("take the identity from this file instead of opening an editor")
  )
}, ({ identityFile, worker }) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const file = layout(yield* Paths).identityMd(worker)
    const before = yield* readIdentity(worker)
    // An org.toml that does not read keeps the default limit here; the next run's start says what is wrong with it.
    const max = (yield* (yield* OrgConfig).snapshot.pipe(Effect.orElseSucceed(() => undefined)))?.box.identity_max ?? 64_000
    // Edited as a copy beside it: a bad edit never replaces what runs start from, and is kept to fix.
    const draft = `${file}.edit`
    let text: string
    if (Option.isSome(identityFile)) {
      text = yield* fs.readFileString(identityFile.value)
    } else {
      yield* fs.writeFileString(draft, before)
      const code = yield* openEditor(draft)
      if (code !== 0) return yield* Effect.fail(new BadInput({ detail: `the editor exited ${code}: nothing changed (your draft is in ${draft})` }))
      text = yield* fs.readFileString(draft)
    }
    const bad = identityProblem(text, max)
    if (bad) {
      if (Option.isSome(identityFile)) return yield* Effect.fail(new BadInput({ detail: `${identityFile.value} cannot be ${worker}'s identity: ${bad}; nothing changed` }))
      return yield* Effect.fail(new BadInput({ detail: `that cannot be ${worker}'s identity: ${bad}; nothing changed — your draft is kept in ${draft}: fix it and run roster worker edit ${worker} --identity-file ${draft}` }))
    }
    if (text === before) {
      // A draft left beside identity.md is harmless: the next edit writes over it.
      yield* fs.remove(draft).pipe(Effect.ignore)
      return yield* Console.log(`${worker}'s identity is unchanged (${file})`)
    }
    yield* writeAtomic(file, text)
    // Saved: a draft left beside it is harmless, and the next edit writes over it.
    yield* fs.remove(draft).pipe(Effect.ignore)
    yield* Console.log(`${worker}'s identity saved; the next run of ${worker} starts from it:`)
    yield* printIdentity(text, file)
  })).pipe(Command.withDescription(
    "Edit a worker's identity (workers/<name>/identity.md: who it is, the head of every run's system prompt) in $VISUAL or $EDITOR, " +
      "or take it from --identity-file. It is checked before it is saved (not empty, under [box] identity_max, no NUL); " +
      "a bad edit changes nothing and keeps your draft. Example: roster worker edit alice"
  ))

const run = Command.make("run", {
  worker: workerArg,
  ceiling: Options.float("ceiling").pipe(
    Options.optional,
    Options.withDescription("minutes before the box is killed (default: [box] ceiling_min in org.toml)")
  ),
  prompt: Args.text({ name: "prompt" }).pipe(Args.atLeast(1), Args.withDescription("what the worker should do")),
  channel: Options.text("channel").pipe(
    Options.optional,
    Options.withDescription("serve a channel: its recent messages read-only at /pihome/channel, and a store the worker keeps per channel at /pihome/channel/store")
  )
}, ({ ceiling, channel, prompt, worker }) =>
  Effect.gen(function*() {
    const code = yield* (yield* Runner).direct({
      worker,
      prompt: prompt.join(" "),
      ...(Option.isSome(ceiling) ? { ceilingMin: ceiling.value } : {}),
      channel: Option.getOrNull(channel)
    }, { say: (text) => Effect.sync(() => void (text !== "" && process.stdout.write(text))), colour: colourOn() })
    if (code !== 0) return yield* Effect.fail(new ExitCode({ code }))
  })).pipe(Command.withDescription(
    "Run one pi session for a worker in a locked-down box. Prints how the box ended and where its outputs are. " +
      "Exit code: the box's own; 2 when the ceiling killed it; 3 when a spend budget stopped it; 130/143 on Ctrl-C/SIGTERM (the box is killed too); 97 when the box's preflight failed. " +
      "Example: roster worker run alice --ceiling 10 \"fix the failing test in notes/\""
  ))

export const workerCommand = Command.make("worker").pipe(
  Command.withDescription("Manage workers and run them in boxes."),
  Command.withSubcommands([add, list, show, edit, run])
)
