import { Command, Options } from "@effect/cli"
import { FileSystem, Path } from "@effect/platform"
import { Clock, Console, Effect, Option, Schema } from "effect"
import { OrgConfig } from "../config/OrgConfig.js"
import { Paths, layout } from "../config/Paths.js"
import { foldFileLines } from "../fs/lines.js"
import { LedgerEntry } from "../gateway/base/ledger.js"
import { BadInput } from "./badInput.js"

interface Sum {
  runs: Set<string>
  answers: number
  input: number
  output: number
  cache_read: number
  cache_write: number
  usd: number
  unpriced: number
}

const empty = (): Sum => ({ runs: new Set(), answers: 0, input: 0, output: 0, cache_read: 0, cache_write: 0, usd: 0, unpriced: 0 })
const decodeLine = Schema.decodeUnknownOption(Schema.parseJson(LedgerEntry))

const add = (s: Sum, e: LedgerEntry) => {
  s.runs.add(e.run_id)
  s.answers++
  s.input += e.input
  s.output += e.output
  s.cache_read += e.cache_read
  s.cache_write += e.cache_write
  s.usd += e.usd
  if (!e.priced) s.unpriced++
}

const view = (s: Sum) => ({
  runs: s.runs.size, answers: s.answers, input_tokens: s.input, output_tokens: s.output,
  cache_read_tokens: s.cache_read, cache_write_tokens: s.cache_write, usd: Number(s.usd.toFixed(6)), unpriced_answers: s.unpriced
})

/** The ledger's lines from `since` (a UTC day) on, one worker's or all, read line by line. */
const readLedger = (since: string, worker: Option.Option<string>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const dir = layout(yield* Paths).ledgerDir
    const days = (yield* fs.readDirectory(dir).pipe(Effect.orElseSucceed(() => [] as Array<string>)))
      .filter((f) => /^\d{4}-\d{2}-\d{2}\.jsonl$/.test(f) && f.slice(0, 10) >= since).sort()
    const byWorker = new Map<string, Sum>()
    for (const f of days) {
      yield* foldFileLines(path.join(dir, f), 0, (n, line) => {
        const e = decodeLine(line)
        if (e._tag === "None" || (Option.isSome(worker) && e.value.worker !== worker.value)) return n
        const s = byWorker.get(e.value.worker) ?? empty()
        add(s, e.value)
        byWorker.set(e.value.worker, s)
        return n + 1
      }).pipe(Effect.ignore)
    }
    return byWorker
  })

const fmt = (n: number) => n.toLocaleString("en-US")

export const usageCommand = Command.make("usage", {
  json: Options.boolean("json").pipe(Options.withDescription("print JSON for scripts")),
  worker: Options.text("worker").pipe(Options.optional, Options.withDescription("only this worker's spending")),
  since: Options.text("since").pipe(Options.optional, Options.withDescription("from this UTC day on (YYYY-MM-DD; default: everything recorded)"))
}, ({ json, since, worker }) =>
  Effect.gen(function*() {
    const from = Option.getOrElse(since, () => "0000-00-00")
    if (Option.isSome(since) && (!/^\d{4}-\d{2}-\d{2}$/.test(from) || Number.isNaN(Date.parse(from)))) {
      const today = new Date(yield* Clock.currentTimeMillis).toISOString().slice(0, 10)
      return yield* Effect.fail(new BadInput({ detail: `--since wants a day as YYYY-MM-DD, e.g. --since ${today}` }))
    }
    const byWorker = yield* readLedger(from, worker)
    const total = empty()
    for (const s of byWorker.values()) {
      for (const r of s.runs) total.runs.add(r)
      total.answers += s.answers
      total.input += s.input
      total.output += s.output
      total.cache_read += s.cache_read
      total.cache_write += s.cache_write
      total.usd += s.usd
      total.unpriced += s.unpriced
    }
    const org = yield* (yield* OrgConfig).snapshot.pipe(Effect.option)
    if (json) {
      return yield* Console.log(JSON.stringify({
        since: Option.getOrNull(since),
        workers: Object.fromEntries([...byWorker].sort(([a], [b]) => a.localeCompare(b)).map(([w, s]) => [w, view(s)])),
        total: view(total),
        budget: Option.isSome(org) ? org.value.budget : null
      }, null, 2))
    }
    if (byWorker.size === 0) return yield* Console.log(`no model answers recorded${Option.isSome(since) ? ` since ${from}` : ""} (the gateway meters each run's Anthropic Messages calls)`)
    yield* Console.log(`${"worker".padEnd(16)} ${"runs".padStart(5)} ${"answers".padStart(8)} ${"in".padStart(12)} ${"out".padStart(12)} ${"cache rd".padStart(12)} ${"cache wr".padStart(12)} ${"USD (est.)".padStart(12)}`)
    const row = (name: string, s: Sum) =>
      `${name.padEnd(16)} ${String(s.runs.size).padStart(5)} ${String(s.answers).padStart(8)} ${fmt(s.input).padStart(12)} ${fmt(s.output).padStart(12)} ` +
      `${fmt(s.cache_read).padStart(12)} ${fmt(s.cache_write).padStart(12)} ${s.usd.toFixed(4).padStart(12)}`
    for (const [w, s] of [...byWorker].sort(([a], [b]) => a.localeCompare(b))) yield* Console.log(row(w, s))
    if (byWorker.size > 1) yield* Console.log(row("total", total))
    if (total.unpriced > 0) {
      yield* Console.log(`${total.unpriced} answer(s) were of a model with no price: counted at the dearest price — add a [[price]] for it in org.toml`)
    }
  })).pipe(Command.withDescription(
    "What the workers' model calls cost: tokens in, out and through the cache, and the estimated USD, per worker, from the gateway's " +
      "spend ledger. Prices: [[price]] in org.toml, else roster's dated defaults. Example: roster usage --worker alice --since 2026-11-01"
  ))
