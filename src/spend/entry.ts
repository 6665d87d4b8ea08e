import { Schema } from "effect"
import { RunId, WorkerName } from "../config/names.js"

/** One model answer in the ledger: whose, which model, its tokens and estimated cost. */
export const LedgerEntry = Schema.Struct({
  time: Schema.String,
  run_id: RunId,
  worker: WorkerName,
  model: Schema.String,
  input: Schema.Number,
  output: Schema.Number,
  cache_read: Schema.Number,
  cache_write: Schema.Number,
  usd: Schema.Number,
  /** false: the model had no price, so it was priced as the dearest. */
  priced: Schema.Boolean,
  /** The chat channel the run was charged to (`slack:<id>`): its `budget_usd_day` counts this answer. */
  chat_channel: Schema.optional(Schema.String)
})
export type LedgerEntry = typeof LedgerEntry.Type

/** What has been spent, as the budgets read it. */
export interface Spent {
  readonly runUsd: number
  readonly runTokens: number
  readonly workerDayUsd: number
  readonly orgDayUsd: number
  /** This UTC day's spending charged to the run's chat channel (0 for a run charged to none). */
  readonly channelDayUsd: number
  /** Why what was spent is not known: a day of the ledger that could not be read. Every budget is closed while it is. */
  readonly unreadable?: string | undefined
}

/** A day of the ledger whose file could not be read: its spending is unknown, not nothing. */
export interface UnreadableDay {
  readonly day: string
  readonly detail: string
}

/** One worker's spending over some days, as `roster usage` shows it. */
export interface UsageSum {
  readonly runs: number
  readonly answers: number
  readonly input: number
  readonly output: number
  readonly cache_read: number
  readonly cache_write: number
  readonly usd: number
  readonly unpriced: number
}

export const dayOf = (iso: string) => iso.slice(0, 10)
export const tokensOf = (e: LedgerEntry) => e.input + e.output + e.cache_read + e.cache_write

