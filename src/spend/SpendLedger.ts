import { Context, Effect, Layer, type Option } from "effect"
import { layout, Paths } from "../config/Paths.js"
import { makeDayFiles } from "../fs/dayFiles.js"
import { dayOf, type LedgerEntry, type Spent, tokensOf, type UnreadableDay, type UsageSum } from "./entry.js"
import { makeLedgerReader } from "./ledgerFiles.js"

export { dayOf, LedgerEntry, type Spent, tokensOf, type UnreadableDay, type UsageSum } from "./entry.js"

/**
 * What model answers cost, for the budgets and `roster usage`: one entry per answer. An answer is
 * counted the moment it ends (`count`: the run's next call is checked against it, whatever the
 * disk or the database does) and then written down (`persist`). One machine keeps it in files;
 * a fleet in its database, so every node's budgets see every node's spending. Built by what
 * needs it (the daemon's gateway, `roster usage`), not by every command.
 */
export class SpendLedger extends Context.Tag("roster/SpendLedger")<SpendLedger, {
  /** Spent so far by this run, and on this UTC day by its worker, the org and the chat channel it is charged to. */
  readonly spent: (worker: string, runId: string, nowIso: string, chatChannel?: string) => Effect.Effect<Spent>
  /**
   * The same, at once, where the ledger holds it in memory (one machine's files); absent where it
   * is asked of a database (a fleet), and a caller that is not a fiber takes the way that can wait.
   */
  readonly spentNow?: (worker: string, runId: string, nowIso: string, chatChannel?: string) => Spent
  /** Counts an answer at once, in memory. */
  readonly count: (e: LedgerEntry) => void
  /** Writes a counted answer down (a failure is logged; the answer still counts). */
  readonly persist: (e: LedgerEntry) => Effect.Effect<void>
  /** True the first time a run is stopped for its budget (in this process): stop it once. */
  readonly stopOnce: (runId: string) => boolean
  /** Each worker's sums from a UTC day on, one worker's or all; only what was charged to one chat channel when given (a channel key). */
  readonly usage: (since: string, worker: Option.Option<string>, chatChannel?: Option.Option<string>) => Effect.Effect<ReadonlyMap<string, UsageSum>>
  /** The days from `since` on whose record cannot be read (what they spent is unknown), where the ledger is files. */
  readonly unreadable?: (since: string) => Effect.Effect<ReadonlyArray<UnreadableDay>>
}>() {
  /**
   * One machine: state/ledger/<UTC day>.jsonl. The recent days' sums are read into memory when
   * the layer is built (a gateway restart forgets nothing that was written) and kept up by `count`.
   */
  static readonly layer = Layer.scoped(
    SpendLedger,
    Effect.gen(function*() {
      // The file services are taken here, once: the reader's and the day files' calls need nothing of a caller.
      const reader = yield* makeLedgerReader
      const sums = makeSums()
      const recent = yield* reader.recentDays
      for (const e of recent.entries) sums.add(e)
      for (const u of recent.unreadable) {
        sums.unreadable(u)
        yield* Effect.logError(`gateway: the spend ledger's day ${u.day} cannot be read (${u.detail}): every budget is closed until it can — fix or move the file aside, then restart the daemon`)
      }
      const stopped = new Set<string>()
      const dir = layout(yield* Paths).ledgerDir
      // The day's file stays open: a model answer's line is one write, not an open, a write and a close.
      const days = yield* makeDayFiles(dir)
      return {
        spent: (worker, runId, nowIso, chatChannel) => Effect.sync(() => sums.spent(worker, runId, nowIso, chatChannel)),
        spentNow: sums.spent,
        count: sums.add,
        persist: (e) =>
          days.write(dayOf(e.time), `${JSON.stringify(e)}\n`).pipe(
            Effect.catchAll((err) => Effect.logError(`gateway: the spend ledger cannot be written (${dir}): ${err.message}`)),
            Effect.asVoid
          ),
        stopOnce: (runId) => !stopped.has(runId) && stopped.add(runId).size > 0,
        usage: reader.usage,
        unreadable: reader.unreadableSince
      }
    })
  )
}

/** The budgets' sums in memory: each run's, and each UTC day's by worker, by chat channel and for the org. */
export const makeSums = () => {
  const runs = new Map<string, { usd: number; tokens: number }>()
  const days = new Map<string, { org: number; workers: Map<string, number>; channels: Map<string, number> }>()
  const lost: Array<UnreadableDay> = []
  return {
    /** A day read at start whose file could not be: what anything spent is not known while it stands. */
    unreadable: (u: UnreadableDay) => void lost.push(u),
    add: (e: LedgerEntry) => {
      const run = runs.get(e.run_id) ?? { usd: 0, tokens: 0 }
      runs.set(e.run_id, { usd: run.usd + e.usd, tokens: run.tokens + tokensOf(e) })
      const day = days.get(dayOf(e.time)) ?? { org: 0, workers: new Map<string, number>(), channels: new Map<string, number>() }
      day.org += e.usd
      day.workers.set(e.worker, (day.workers.get(e.worker) ?? 0) + e.usd)
      if (e.chat_channel !== undefined) day.channels.set(e.chat_channel, (day.channels.get(e.chat_channel) ?? 0) + e.usd)
      days.set(dayOf(e.time), day)
    },
    spent: (worker: string, runId: string, nowIso: string, chatChannel?: string): Spent => {
      const run = runs.get(runId)
      const day = days.get(dayOf(nowIso))
      return {
        runUsd: run?.usd ?? 0,
        runTokens: run?.tokens ?? 0,
        workerDayUsd: day?.workers.get(worker) ?? 0,
        orgDayUsd: day?.org ?? 0,
        channelDayUsd: chatChannel === undefined ? 0 : day?.channels.get(chatChannel) ?? 0,
        ...(lost.length > 0 ? { unreadable: `the spend ledger's day ${lost.map((u) => u.day).join(", ")} could not be read (${lost[0]?.detail})` } : {})
      }
    }
  }
}
