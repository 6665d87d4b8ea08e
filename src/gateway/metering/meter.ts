import { canonicalTarget } from "../policy/canonicalPath.js"
import { Clock, Effect } from "effect"
import { costOf, priceFor, type TokenCount, totalTokens } from "../../config/prices.js"
import { chatFor, type Org } from "../../config/schema.js"
import { parseChatChannelKey } from "../../contract/origin.js"
import { BoxBackend } from "../../backend/BoxBackend.js"
import { RunLog } from "../../run/RunLog.js"
import type { WorkerSettings } from "../../worker/workers.js"
import { Gateway, type GatewayContext, type GatewayState } from "../egress/Gateway.js"
import type { Caller, RunCaller } from "../base/identify.js"
import type { LedgerEntry, Spent } from "../../spend/SpendLedger.js"
import { Refusal } from "../base/refusal.js"
import { taintOrHold } from "../base/taint.js"
import { UsageTap } from "./usageTap.js"

/** An Anthropic Messages call: the one kind of request whose answer the gateway meters. */
export const isModelCall = (method: string, url: string) => {
  if (method !== "POST") return false
  // Its canonical path: "/v1//messages" or "/v1/x/../messages" is a model call to an upstream that folds them, so it is metered.
  const target = canonicalTarget(url)
  return (target.ok ? target.path : url.split("?")[0]) === "/v1/messages"
}

type Which = "run_usd" | "run_tokens" | "worker_daily_usd" | "org_daily_usd" | "budget_usd_day" | "ledger_unreadable"

export interface Limits {
  readonly run_usd?: number | undefined
  readonly run_tokens?: number | undefined
  readonly worker_daily_usd?: number | undefined
  readonly org_daily_usd?: number | undefined
  /** The run's chat channel's `[[chat.channel]] budget_usd_day`, and which channel it is (for the words). */
  readonly channel_usd_day?: { readonly usd: number; readonly provider: string; readonly id: string } | undefined
  readonly on_cross: "cut" | "finish"
}

interface Over {
  readonly which: Which
  readonly limit: number
  readonly spent: number
  /** The chat channel whose budget it is (`budget_usd_day`). */
  readonly channel?: { readonly provider: string; readonly id: string }
  /** Why what was spent is unknown (`ledger_unreadable`). */
  readonly detail?: string
}

/** The budgets for a worker: each one its worker.toml [budget] sets, else org.toml's. */
const limitsOf = (org: Org, settings: Pick<WorkerSettings, "budget">): Limits => ({
  ...org.budget,
  ...Object.fromEntries(Object.entries(settings.budget ?? {}).filter(([, v]) => v !== undefined))
})

/** The daily budget of the chat channel a run is charged to (`slack:<id>`), as org.toml maps it now. */
export const channelBudget = (org: Org, chatChannel: string | undefined): Limits["channel_usd_day"] => {
  const place = chatChannel === undefined ? undefined : parseChatChannelKey(chatChannel)
  const found = place && chatFor(org, place)
  return found?.channel.budget_usd_day === undefined ? undefined : { usd: found.channel.budget_usd_day, provider: place!.provider, id: found.channel.id }
}

/**
 * A worker's budgets as its worker.toml says now (looked at twice a second), org.toml's when it
 * cannot be read; with its chat channel's daily budget when the run is charged to one.
 */
export const limitsFor = (org: Org, worker: string, chatChannel?: string) =>
  Effect.flatMap(Gateway, (self) => self.workerSettings(worker)).pipe(
    Effect.map((s) => limitsOf(org, s)),
    // Only a worker.toml never read well fails here (a bad edit keeps the last good): org.toml's budgets hold then.
    Effect.orElseSucceed((): Limits => org.budget),
    Effect.map((l): Limits => ({ ...l, channel_usd_day: channelBudget(org, chatChannel) }))
  )

/** The first budget `spent` plus this answer's `usd`/`tokens` reaches (`atLimit`) or passes. */
const firstOver = (l: Limits, s: Spent, usd: number, tokens: number, atLimit: boolean): Over | undefined => {
  const past = (spent: number, limit: number | undefined) => limit !== undefined && (atLimit ? spent >= limit : spent > limit)
  if (past(s.runUsd + usd, l.run_usd)) return { which: "run_usd", limit: l.run_usd!, spent: s.runUsd + usd }
  if (past(s.runTokens + tokens, l.run_tokens)) return { which: "run_tokens", limit: l.run_tokens!, spent: s.runTokens + tokens }
  if (past(s.workerDayUsd + usd, l.worker_daily_usd)) return { which: "worker_daily_usd", limit: l.worker_daily_usd!, spent: s.workerDayUsd + usd }
  if (past(s.orgDayUsd + usd, l.org_daily_usd)) return { which: "org_daily_usd", limit: l.org_daily_usd!, spent: s.orgDayUsd + usd }
  if (l.channel_usd_day && past(s.channelDayUsd + usd, l.channel_usd_day.usd)) {
    return { which: "budget_usd_day", limit: l.channel_usd_day.usd, spent: s.channelDayUsd + usd, channel: l.channel_usd_day }
  }
  return undefined
}

/**
 * In words the agent and its person act on — and that pi reads as final ("out of budget" is
 * one of the phrases it never retries).
 */
export const budgetText = (o: Over, worker: string) => {
  if (o.which === "ledger_unreadable") {
    return `out of budget: ${o.detail ?? "the spend ledger could not be read"}, so no budget can be checked — this run is stopped. ` +
      "Fix or move aside that day's file in the state folder's ledger/, then restart the daemon (roster server stop, roster server start)"
  }
  const amount = (n: number) => (o.which === "run_tokens" ? `${Math.round(n)} tokens` : `$${n.toFixed(4)} (estimated)`)
  if (o.channel) {
    return `out of budget: ${o.channel.provider} channel ${o.channel.id} may spend ${amount(o.limit)} a day and ${amount(o.spent)} is spent today — ` +
      `this run is stopped. The channel's spending starts again at 00:00 UTC; to allow more, raise budget_usd_day of its [[chat.channel]] in org.toml`
  }
  const where = o.which === "org_daily_usd" ? "[budget] in org.toml" : `[budget] in org.toml or in workers/${worker}/worker.toml`
  return `out of budget: ${o.which} is ${amount(o.limit)} and ${amount(o.spent)} is spent — ` +
    `this run is stopped. To allow more, raise ${o.which} in ${where}`
}

/** The SSE event an answer cut for its budget ends with: an error the Anthropic SDKs raise as final. */
const cutEvent = (text: string) =>
  `event: error\ndata: ${JSON.stringify({ type: "error", error: { type: "billing_error", message: `roster gateway: ${text}` } })}\n\n`

/** How long a stopped run's box lives on, so its agent records the refusal it got (it can reach no model meanwhile). */
const STOP_GRACE = "1 second"

/**
 * Stops a run over its budget: the stop in its record (its end is `budget`), a taint, and its box
 * killed in the gateway's own scope once the agent has had a moment to record why.
 */
const stopRun = (caller: Caller, text: string) =>
  Effect.gen(function*() {
    const self = yield* Gateway
    if (!caller.runId || !caller.worker || !self.ledger.stopOnce(caller.runId)) return
    const runId = caller.runId
    yield* (yield* RunLog).append(caller.worker, runId, { kind: "stop", by: "budget", detail: text }).pipe(
      Effect.catchAll((e) => Effect.logError(`gateway: run ${runId}: its budget stop could not be recorded: ${e.message}`))
    )
    yield* taintOrHold(self.taints, caller, "budget", null, text)
    yield* Effect.logWarning(`gateway: run ${runId} of ${caller.worker} stopped: ${text}`)
    self.fork(Effect.gen(function*() {
      yield* Effect.sleep(STOP_GRACE)
      yield* (yield* BoxBackend).killRun(runId)
    }).pipe(Effect.catchAll((e) => Effect.logError(`gateway: the box of run ${runId} (over its budget) could not be killed: ${e.message}`))))
  })

export interface Meter {
  /** The tap for an answer of this content type (SSE or JSON), or none to read. */
  readonly tap: (contentType: string, stopUpstream: () => void) => UsageTap | undefined
  /**
   * After the answer (it was counted in memory as it ended): its ledger line and usage event
   * written, and the run stopped if it crossed a budget — by the gateway's usage notes, in order.
   */
  readonly settle: () => void
}

/** What a model call is metered against: its worker's budgets, and what was spent when it began. */
export interface MeterBasis {
  readonly limits: Limits
  readonly spent: Spent
  /** When the call began (ISO): its ledger entry's time, and the UTC day its daily budgets count. */
  readonly startedAt: string
}

/** The budget a call would start past (already used up): it is refused before anything leaves. */
export const overAtStart = (basis: MeterBasis) => unknownSpend(basis) ?? firstOver(basis.limits, basis.spent, 0, 0, true)

/** A budget set while what was spent is unknown (a ledger day that cannot be read): closed, never re-opened by reading none. */
const unknownSpend = (basis: MeterBasis): Over | undefined => {
  const l = basis.limits
  const set = [l.run_usd, l.run_tokens, l.worker_daily_usd, l.org_daily_usd, l.channel_usd_day?.usd].some((x) => x !== undefined)
  return set && basis.spent.unreadable ? { which: "ledger_unreadable", limit: 0, spent: 0, detail: basis.spent.unreadable } : undefined
}

/**
 * The meter of one model call's answer, built without a fiber (the common model call runs in
 * callbacks, `fastForward`; `startMeter` is the same for a handler that is an Effect): it cuts the
 * answer at the next event once it crosses a budget (or lets it finish, with `on_cross =
 * "finish"`) and stops the run either way. `run` runs an Effect to its end (the stop is recorded
 * before the box is sent the cut event).
 */
export const openMeter = (
  self: GatewayState,
  run: (work: Effect.Effect<void, never, GatewayContext>) => Promise<void>,
  caller: RunCaller,
  org: Org,
  model: string,
  { limits, spent, startedAt }: MeterBasis
): Meter => {
  const { known, price } = priceFor(org.price, model)
  let crossed: Over | undefined
  let counted: LedgerEntry | undefined
  const onProgress = (count: TokenCount) => {
    crossed ??= firstOver(limits, spent, costOf(price, count), totalTokens(count), false)
    return crossed && limits.on_cross === "cut" ? "cut" as const : "go" as const
  }
  return {
    tap: (contentType, stopUpstream) => {
      const kind = contentType.includes("text/event-stream") ? "sse" : contentType.includes("json") ? "json" : undefined
      if (!kind) return undefined
      return new UsageTap(kind, {
        onProgress,
        cutEvent: () => cutEvent(crossed ? budgetText(crossed, caller.worker) : "out of budget"),
        onCut: stopUpstream,
        beforeCutEvent: () => run(stopRun(caller, budgetText(crossed!, caller.worker))),
        // Counted before the box sees the answer end, so its next call is checked against it.
        onEnd: (count) => {
          if (totalTokens(count) === 0) return
          counted = {
            time: startedAt,
            run_id: caller.runId,
            worker: caller.worker,
            model,
            ...count,
            usd: costOf(price, count),
            priced: known,
            ...(caller.chatChannel ? { chat_channel: caller.chatChannel } : {})
          }
          self.ledger.count(counted)
          // A JSON answer is read whole at its end: a budget it passed is found here.
          onProgress(count)
        }
      })
    },
    settle: () => self.usageNotes.submit({ entry: counted, then: crossed ? stopRun(caller, budgetText(crossed, caller.worker)) : undefined })
  }
}

/** A call refused for a budget already used up: a 4xx the SDKs do not retry, which says which budget and how to raise it. */
const budgetRefusal = (over: Over, worker: string) => new Refusal(402, budgetText(over, worker), { why: "budget" })

/**
 * Before a model call of a run: refused (402, "out of budget") and the run stopped when a budget
 * is already used up; otherwise its answer's meter ({@link openMeter}). Gives the worker's budgets
 * as read now, for the connection's next calls (`GrantSeen.limits`).
 */
export const startMeter = (caller: RunCaller, org: Org, model: string) =>
  Effect.gen(function*() {
    const self = yield* Gateway
    const limits = yield* limitsFor(org, caller.worker, caller.chatChannel)
    const startedAt = new Date(yield* Clock.currentTimeMillis).toISOString()
    const basis = { limits, spent: yield* self.ledger.spent(caller.worker, caller.runId, startedAt, caller.chatChannel), startedAt }
    const already = overAtStart(basis)
    if (already) {
      yield* stopRun(caller, budgetText(already, caller.worker))
      return { refusal: budgetRefusal(already, caller.worker), limits } as const
    }
    return { meter: openMeter(self, self.runPromise, caller, org, model, basis), limits } as const
  })
