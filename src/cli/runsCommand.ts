import { knowledgeLine } from "../contract/knowledge.js"
import { Args, Command, Options } from "@effect/cli"
import { FileSystem } from "@effect/platform"
import { Console, Effect, Schema } from "effect"
import { Paths, layout } from "../config/Paths.js"
import { preflightText } from "../contract/preflight.js"
import { runFiles } from "../contract/runFiles.js"
import type { RunRecord } from "../run/RunLog.js"
import { type Turns, turnsStep } from "../contract/transcript.js"
import { foldFileLines } from "../fs/lines.js"
import { visible } from "./terminal.js"
import { ExitCode } from "./exit.js"
import { isTainted, taintLine } from "../contract/taint.js"
import { untaintRun } from "../supervisor/untaint.js"
import { auditOf, findRun, pageOfRuns } from "../run/query.js"
import { readTurnLine } from "../contract/turnLine.js"
import { readOr } from "../fs/notFound.js"

const json = Options.boolean("json").pipe(Options.withDescription("print JSON for scripts"))

export class UnknownRun extends Schema.TaggedError<UnknownRun>()("UnknownRun", { runId: Schema.String }) {
  override get message() {
    return `no run ${this.runId} — list runs with: roster runs list`
  }
}

const line = (r: RunRecord) =>
  `${r.run_id}  ${r.worker.padEnd(12)} ${r.kind.padEnd(7)} ${(r.ended_by ?? "running").padEnd(8)} exit ${r.exit_code ?? "-"}` +
  `${r.node ? `  on ${r.node}` : ""}${r.error ? `  ${visible(r.error.split("\n")[0] ?? "")}` : ""}`

const list = Command.make("list", {
  json,
  worker: Options.text("worker").pipe(Options.optional, Options.withDescription("only this worker's runs")),
  limit: Options.integer("limit").pipe(Options.withDefault(20), Options.withDescription("how many (newest first)"))
}, ({ json, limit, worker }) =>
  Effect.gen(function*() {
    const { runs } = yield* pageOfRuns(0, Math.max(0, limit), worker)
    if (json) return yield* Console.log(JSON.stringify(runs, null, 2))
    if (runs.length === 0) return yield* Console.log("no runs yet")
    for (const r of runs) yield* Console.log(line(r))
  })).pipe(Command.withDescription("List runs, newest first (under [cluster], every node's, each with the node that ran it)."))

const show = Command.make("show", {
  json,
  runId: Args.text({ name: "run-id" }).pipe(Args.withDescription("a run id from roster runs list"))
}, ({ json, runId }) =>
  Effect.gen(function*() {
    const run = yield* findRun(runId)
    if (!run) return yield* Effect.fail(new UnknownRun({ runId }))
    const dir = layout(yield* Paths).runDir(run.worker, run.run_id)
    const fs = yield* FileSystem.FileSystem
    const { transcript, turns: turnsFile } = runFiles(dir)
    // Read line by line: a transcript may be hundreds of MB.
    // runs show shows what it can (readOr: a file not there yet is none; one that cannot be read is said).
    const lines = yield* foldFileLines(transcript, 0, (n, l) => (l.trim() === "" ? n : n + 1)).pipe(readOr(transcript, 0))
    const requests = yield* auditOf(run)
    const turnInputs = run.kind === "session"
      ? (yield* fs.readFileString(turnsFile).pipe(readOr(turnsFile, ""))).split("\n").map(readTurnLine)
        .filter((t) => t !== undefined).map((t) => t.input)
      : []
    const turnReplies = run.kind === "session"
      ? yield* foldFileLines(transcript, [] as Turns, turnsStep).pipe(readOr(transcript, [] as Turns))
      : []
    const turns = turnInputs.map((input, i) => ({ input, replies: turnReplies[i]?.replies ?? [] }))
    if (json) {
      return yield* Console.log(JSON.stringify({ ...run, dir, transcript_lines: lines, gateway_requests: requests, ...(run.kind === "session" ? { turns } : {}) }, null, 2))
    }
    yield* Console.log(`run ${run.run_id}`)
    yield* Console.log(`  worker:    ${run.worker} (${run.kind}${run.task_id ? `, task ${run.task_id}` : ""})`)
    if (run.node) yield* Console.log(`  node:      ${run.node}`)
    yield* Console.log(`  started:   ${run.started_at}`)
    yield* Console.log(`  finished:  ${run.finished_at ?? "(still running, or the runner died)"}`)
    yield* Console.log(`  ended by:  ${run.ended_by ?? "-"}   exit code: ${run.exit_code ?? "-"}`)
    if (run.error) yield* Console.log(`  error:     ${visible(run.error)}`)
    if (run.ceiling_min !== undefined) yield* Console.log(`  ceiling:   ${run.ceiling_min} min`)
    if (run.runtime) yield* Console.log(`  runtime:   ${run.runtime}${run.runtime === "runsc" ? " (gVisor)" : ""}`)
    if (run.container) yield* Console.log(`  preflight: ${visible(preflightText(run.preflight))}`)
    if (run.store_snapshot) yield* Console.log(`  snapshot:  ${run.store_snapshot}`)
    if (run.channel) yield* Console.log(`  channel:   ${run.channel}`)
    if (run.usage) {
      const u = run.usage
      yield* Console.log(`  usage:     ${u.answers} model answer${u.answers === 1 ? "" : "s"} (${u.models.join(", ")}): ${u.input_tokens} in, ${u.output_tokens} out, ` +
        `${u.cache_read_tokens} cache read, ${u.cache_write_tokens} cache write — $${u.usd.toFixed(4)} estimated`)
    }
    for (const w of run.warnings ?? []) yield* Console.log(`  warning:   ${visible(w)}`)
    for (const t of run.tainted ?? []) yield* Console.log(`  tainted:   ${visible(taintLine(t))}`)
    if (run.untainted) {
      yield* Console.log(`  untainted: ${run.untainted.at} by a person: ${visible(run.untainted.reason)}${isTainted(run) ? " (tainted again since)" : ""}`)
      for (const l of run.untainted.landed) yield* Console.log(`    ${l.connection} ${l.ref}: ${visible(l.detail)}`)
    } else if (isTainted(run)) {
      yield* Console.log(`             its gated-repo work stays quarantined; to land it: roster runs untaint ${run.run_id} --reason "…"`)
    }
    for (const p of run.knowledge_pushes ?? []) {
      yield* Console.log(`  knowledge_push ${p.connection}: ${p.ok ? `landed ${p.head?.slice(0, 12)} on ${p.landed_ref}` : `refused: ${visible(p.reason ?? "")}`}`)
    }
    for (const k of run.knowledge ?? []) yield* Console.log(`  repo:      ${visible(knowledgeLine(k))}`)
    yield* Console.log(`  outputs:   ${dir}`)
    yield* Console.log(`  transcript: ${transcript} (${lines} lines)`)
    if (run.final_text) yield* Console.log(`  final text: ${visible(run.final_text.slice(0, 300))}`)
    for (const m of run.messages ?? []) yield* Console.log(`  message:   ${visible(m)}`)
    if (run.kind === "session") {
      yield* Console.log(`  turns (${turns.length}):`)
      for (const [i, t] of turns.entries()) {
        yield* Console.log(`    ${i + 1}. ${visible(t.input.split("\n").at(-1)?.slice(0, 100) ?? "")}`)
        const last = t.replies.at(-1)
        if (last) yield* Console.log(`       -> ${visible(last.slice(0, 200))}`)
      }
    }
    yield* Console.log(requests.length === 0 ? "  gateway requests: none" : `  gateway requests (${requests.length}):`)
    for (const r of requests) {
      const target = `${r.method} ${r.host}:${r.port}${r.path}`
      yield* Console.log(visible(`    ${r.time.slice(11, 19)}  ${r.status}  ${target}${r.injected ? "  [credential injected]" : ""}  ` +
        `${r.bytes_up}B up ${r.bytes_down}B down${r.note ? `  (${r.note})` : ""}`))
    }
  })).pipe(Command.withDescription("Show one run: how it ended, its error, where its outputs are."))

const untaint = Command.make("untaint", {
  json,
  runId: Args.text({ name: "run-id" }).pipe(Args.withDescription("a tainted run, as roster runs show lists it")),
  reason: Options.text("reason").pipe(Options.withDescription("why its work may land after all (recorded in the run)"))
}, ({ json, reason, runId }) =>
  Effect.gen(function*() {
    const found = yield* findRun(runId)
    if (!found) return yield* Effect.fail(new UnknownRun({ runId }))
    const done = yield* untaintRun(found.worker, runId, reason)
    if (json) return yield* Console.log(JSON.stringify({ run_id: runId, live: done.live, landed: done.landed, unmarked: done.unmarked }, null, 2))
    yield* Console.log(`run ${runId} untainted (recorded: ${visible(reason)})`)
    for (const store of done.unmarked) yield* Console.log(`  cleared its mark on ${store}: runs given it no longer start tainted on its account`)
    if (done.live) yield* Console.log("the run is still live: its knowledge_push works again; its work is quarantined as usual at its end")
    else if (done.landed.length === 0) yield* Console.log("it left no quarantined work to land")
    for (const l of done.landed) yield* Console.log(`  ${l.connection} ${l.ref}: ${visible(l.detail)}`)
    if (done.landed.some((l) => !l.ok)) return yield* Effect.fail(new ExitCode({ code: 1 }))
  })).pipe(Command.withDescription(
    "Decide that a tainted run's work may land after all: the reason is recorded in the run, and its quarantined gated-repo work " +
      "lands as a knowledge_push would (fast-forward only, protected paths untouched). Exit 1 if some could not land. " +
      `Example: roster runs untaint 2026-11-29-10-15-00-0a1b2c3d --reason "the refused host was a typo; diff reviewed"`
  ))

export const runsCommand = Command.make("runs").pipe(
  Command.withDescription("Look at past runs, and decide about tainted ones."),
  Command.withSubcommands([list, show, untaint])
)

