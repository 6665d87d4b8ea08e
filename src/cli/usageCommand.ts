import { Command, Options } from "@effect/cli"
import { Clock, Console, Effect, Option } from "effect"
import { OrgConfig } from "../config/OrgConfig.js"
import { spendLedgerOf } from "../fleet/spendLedger.js"
import { SpendLedger, type UsageSum } from "../spend/SpendLedger.js"
import { BadInput } from "./badInput.js"
import { chatFor } from "../config/schema.js"
import { parseChatChannelKey } from "../contract/origin.js"

const empty = (): UsageSum => ({ runs: 0, answers: 0, input: 0, output: 0, cache_read: 0, cache_write: 0, usd: 0, unpriced: 0 })

const plus = (a: UsageSum, b: UsageSum): UsageSum => ({
  runs: a.runs + b.runs,
  answers: a.answers + b.answers,
  input: a.input + b.input,
  output: a.output + b.output,
  cache_read: a.cache_read + b.cache_read,
  cache_write: a.cache_write + b.cache_write,
  usd: a.usd + b.usd,
  unpriced: a.unpriced + b.unpriced
})

const view = (s: UsageSum) => ({
  runs: s.runs, answers: s.answers, input_tokens: s.input, output_tokens: s.output,
  cache_read_tokens: s.cache_read, cache_write_tokens: s.cache_write, usd: Number(s.usd.toFixed(6)), unpriced_answers: s.unpriced
})

const fmt = (n: number) => n.toLocaleString("en-US")

export const usageCommand = Command.make("usage", {
  json: Options.boolean("json").pipe(Options.withDescription("print JSON for scripts")),
  worker: Options.text("worker").pipe(Options.optional, Options.withDescription("only this worker's spending")),
  since: Options.text("since").pipe(Options.optional, Options.withDescription("from this UTC day on (YYYY-MM-DD; default: everything recorded)")),
  channel: Options.text("channel").pipe(
    Options.optional,
    Options.withDescription("only what a chat channel's sessions and the work they queued spent: slack:<channel-id> or discord:<channel-id>")
  )
}, ({ channel, json, since, worker }) =>
  Effect.gen(function*() {
    const from = Option.getOrElse(since, () => "0000-00-00")
    if (Option.isSome(since) && (!/^\d{4}-\d{2}-\d{2}$/.test(from) || Number.isNaN(Date.parse(from)))) {
      const today = new Date(yield* Clock.currentTimeMillis).toISOString().slice(0, 10)
      return yield* Effect.fail(new BadInput({ detail: `--since wants a day as YYYY-MM-DD, e.g. --since ${today}` }))
    }
    const place = Option.map(channel, (c) => ({ typed: c, parsed: parseChatChannelKey(c) }))
    if (Option.isSome(place) && place.value.parsed === undefined) {
      return yield* Effect.fail(new BadInput({ detail: `--channel wants slack:<channel-id> or discord:<channel-id> (as in [[chat.channel]] id), e.g. --channel slack:C0123ABCD; got "${place.value.typed}"` }))
    }
    const key = Option.flatMap(place, (p) => Option.fromNullable(p.parsed))
    const org = yield* (yield* OrgConfig).snapshot.pipe(Effect.option)
    // Under [cluster] the fleet's ledger (every node's answers), else this machine's files.
    const ledger = Option.isSome(org) ? spendLedgerOf(org.value) : SpendLedger.layer
    const today = new Date(yield* Clock.currentTimeMillis).toISOString().slice(0, 10)
    const { byWorker, channelToday } = yield* Effect.gen(function*() {
      const l = yield* SpendLedger
      const chatKey = Option.map(key, (k) => k.key)
      const byWorker = yield* l.usage(from, worker, chatKey)
      // A day whose record cannot be read is said, not summed as nothing.
      for (const u of l.unreadable ? yield* l.unreadable(from) : []) {
        yield* Console.error(`roster usage: the ledger's day ${u.day} cannot be read (${u.detail}): its spending is not in these sums, and the daemon's budgets are closed until it can be`)
      }
      // A channel's budget is a UTC day's: what it spent today, whatever --since says.
      const channelToday = Option.isSome(chatKey) ? [...(yield* l.usage(today, Option.none(), chatKey)).values()].reduce(plus, empty()).usd : undefined
      return { byWorker, channelToday }
    }).pipe(Effect.provide(ledger))
    const channelBudget = Option.isSome(key) && Option.isSome(org) ? chatFor(org.value, key.value)?.channel.budget_usd_day ?? null : null
    // A run is one worker's: the workers' run counts add up.
    const total = [...byWorker.values()].reduce(plus, empty())
    if (json) {
      return yield* Console.log(JSON.stringify({
        since: Option.getOrNull(since),
        workers: Object.fromEntries([...byWorker].sort(([a], [b]) => a.localeCompare(b)).map(([w, s]) => [w, view(s)])),
        total: view(total),
        budget: Option.isSome(org) ? org.value.budget : null,
        ...(Option.isSome(key)
          ? { channel: { key: key.value.key, budget_usd_day: channelBudget, spent_today_usd: Number((channelToday ?? 0).toFixed(6)), day: today } }
          : {})
      }, null, 2))
    }
    if (Option.isSome(key)) {
      const budget = channelBudget === null ? "no budget_usd_day" : `budget_usd_day $${channelBudget.toFixed(2)}`
      yield* Console.log(`${key.value.provider} channel ${key.value.channel}: $${(channelToday ?? 0).toFixed(4)} (est.) spent today (${today}, UTC), ${budget}`)
    }
    if (byWorker.size === 0) return yield* Console.log(`no model answers recorded${Option.isSome(since) ? ` since ${from}` : ""}${Option.isSome(key) ? " for this channel" : ""} (the gateway meters each run's Anthropic Messages calls)`)
    yield* Console.log(`${"worker".padEnd(16)} ${"runs".padStart(5)} ${"answers".padStart(8)} ${"in".padStart(12)} ${"out".padStart(12)} ${"cache rd".padStart(12)} ${"cache wr".padStart(12)} ${"USD (est.)".padStart(12)}`)
    const row = (name: string, s: UsageSum) =>
      `${name.padEnd(16)} ${String(s.runs).padStart(5)} ${String(s.answers).padStart(8)} ${fmt(s.input).padStart(12)} ${fmt(s.output).padStart(12)} ` +
      `${fmt(s.cache_read).padStart(12)} ${fmt(s.cache_write).padStart(12)} ${s.usd.toFixed(4).padStart(12)}`
    for (const [w, s] of [...byWorker].sort(([a], [b]) => a.localeCompare(b))) yield* Console.log(row(w, s))
    if (byWorker.size > 1) yield* Console.log(row("total", total))
    if (total.unpriced > 0) {
      yield* Console.log(`${total.unpriced} answer(s) were of a model with no price: counted at the dearest price — add a [[price]] for it in org.toml`)
    }
  })).pipe(Command.withDescription(
    "What the workers' model calls cost: tokens in, out and through the cache, and the estimated USD, per worker, from the gateway's " +
      "spend ledger (under [cluster], the whole fleet's). Prices: [[price]] in org.toml, else roster's dated defaults. Examples: roster usage --worker alice --since 2026-11-01; roster usage --channel slack:C0123ABCD (a chat channel's own spending against its budget_usd_day)"
  ))
