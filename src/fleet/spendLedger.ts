import { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Layer, Option, Ref, Schedule } from "effect"
import * as crypto from "node:crypto"
import { dayOf, type LedgerEntry, makeSums, type Spent, SpendLedger, type UsageSum } from "../spend/SpendLedger.js"
import type { HostFiles } from "../config/Paths.js"
import type { Org } from "../config/schema.js"
import type { Files } from "../fs/Files.js"
import type { Vault } from "../vault/Vault.js"
import type { FleetDbError } from "./errors.js"
import { fleetSqlLayer } from "./connect.js"
import { sqlDetail } from "./sqlDetail.js"
import { logDefects } from "../report/defects.js"

const ZERO: Spent = { runUsd: 0, runTokens: 0, workerDayUsd: 0, orgDayUsd: 0, channelDayUsd: 0 }
const plus = (a: Spent, b: Spent): Spent => ({
  runUsd: a.runUsd + b.runUsd,
  runTokens: a.runTokens + b.runTokens,
  workerDayUsd: a.workerDayUsd + b.workerDayUsd,
  orgDayUsd: a.orgDayUsd + b.orgDayUsd,
  channelDayUsd: a.channelDayUsd + b.channelDayUsd
})

/**
 * A fleet node's spend ledger: every answer is a row of the fleet's database, so a worker's daily
 * budget counts what every node spent. What the budgets read is the database's sums plus this
 * node's answers counted but not yet written there (an answer counts the moment it ends, as on one
 * machine). While the database does not answer, the budgets read its sums as last seen plus this
 * node's own since (said once), and the unwritten answers are written when it is back.
 */
export const fleetSpendLedger = (node: string) =>
  Layer.scoped(
    SpendLedger,
    Effect.gen(function*() {
      const sql = yield* SqlClient
      /** Counted here, not yet in the database, each with the id its row will have. */
      const unwritten = new Map<LedgerEntry, string>()
      /** The database's sums as last read: each run's, and each UTC day's by worker, by chat channel and for the org. */
      const lastRuns = new Map<string, Pick<Spent, "runUsd" | "runTokens">>()
      const lastDays = new Map<string, { org: number; workers: Map<string, number>; channels: Map<string, number> }>()
      const remember = (worker: string, runId: string, day: string, chatChannel: string | undefined, s: Spent) => {
        lastRuns.set(runId, { runUsd: s.runUsd, runTokens: s.runTokens })
        const d = lastDays.get(day) ?? { org: 0, workers: new Map<string, number>(), channels: new Map<string, number>() }
        d.org = s.orgDayUsd
        d.workers.set(worker, s.workerDayUsd)
        if (chatChannel !== undefined) d.channels.set(chatChannel, s.channelDayUsd)
        lastDays.set(day, d)
      }
      const asLastSeen = (worker: string, runId: string, day: string, chatChannel: string | undefined): Spent => ({
        ...(lastRuns.get(runId) ?? { runUsd: 0, runTokens: 0 }),
        workerDayUsd: lastDays.get(day)?.workers.get(worker) ?? 0,
        orgDayUsd: lastDays.get(day)?.org ?? 0,
        channelDayUsd: chatChannel === undefined ? 0 : lastDays.get(day)?.channels.get(chatChannel) ?? 0
      })
      const down = yield* Ref.make(false)
      const stopped = new Set<string>()

      const ours = (worker: string, runId: string, nowIso: string, chatChannel: string | undefined) => {
        const sums = makeSums()
        for (const e of unwritten.keys()) sums.add(e)
        return sums.spent(worker, runId, nowIso, chatChannel)
      }
      const fromDatabase = (worker: string, runId: string, day: string, chatChannel: string | undefined) =>
        sql<{ readonly run_usd: number; readonly run_tokens: number; readonly worker_day_usd: number; readonly org_day_usd: number; readonly channel_day_usd: number }>`
          SELECT coalesce(sum(usd) FILTER (WHERE run_id = ${runId}), 0)::float8 AS run_usd,
            coalesce(sum(input + output + cache_read + cache_write) FILTER (WHERE run_id = ${runId}), 0)::float8 AS run_tokens,
            coalesce(sum(usd) FILTER (WHERE day = ${day} AND worker = ${worker}), 0)::float8 AS worker_day_usd,
            coalesce(sum(usd) FILTER (WHERE day = ${day}), 0)::float8 AS org_day_usd,
            coalesce(sum(usd) FILTER (WHERE day = ${day} AND chat_channel = ${chatChannel ?? null}), 0)::float8 AS channel_day_usd
          FROM roster_spend WHERE run_id = ${runId} OR day = ${day}`.withoutTransform.pipe(
          Effect.map((rows): Spent => {
            const r = rows[0]
            return r
              ? { runUsd: r.run_usd, runTokens: r.run_tokens, workerDayUsd: r.worker_day_usd, orgDayUsd: r.org_day_usd, channelDayUsd: r.channel_day_usd }
              : ZERO
          })
        )
      const answered = Ref.getAndSet(down, false).pipe(
        Effect.flatMap((was) => (was ? Effect.logInfo("fleet: the spend ledger is read from the database again") : Effect.void))
      )
      const unanswered = (detail: string) =>
        Ref.getAndSet(down, true).pipe(Effect.flatMap((was) =>
          was ? Effect.void : Effect.logWarning(
            `fleet: the spend ledger cannot be read from the database (${detail}): budgets count the fleet's spending as last seen plus this node's since`
          )))

      const insert = (e: LedgerEntry, id: string) =>
        sql`INSERT INTO roster_spend (id, time, day, run_id, worker, model, input, output, cache_read, cache_write, usd, priced, node, chat_channel)
          VALUES (${id}, ${new Date(e.time)}, ${dayOf(e.time)}, ${e.run_id}, ${e.worker}, ${e.model}, ${e.input}, ${e.output},
            ${e.cache_read}, ${e.cache_write}, ${e.usd}, ${e.priced}, ${node}, ${e.chat_channel ?? null})
          ON CONFLICT (id) DO NOTHING`.pipe(Effect.tap(() => Effect.sync(() => unwritten.delete(e))))

      // What could not be written (the database down) is written when it answers, oldest first.
      yield* Effect.forkScoped(Effect.gen(function*() {
        for (const [e, id] of [...unwritten]) yield* insert(e, id)
      }).pipe(
        // The database still down: the lines stay in `unwritten`, and the next pass (5 s) tries them again.
        Effect.catchAll(() => Effect.void),
        // A pass that dies of a bug is logged; the next pass still comes.
        logDefects("fleet: unexpected failure writing the spend lines the database missed (tried again in 5 s)"),
        Effect.repeat(Schedule.spaced("5 seconds"))
      ))

      return {
        spent: (worker, runId, nowIso, chatChannel) => {
          const day = dayOf(nowIso)
          return fromDatabase(worker, runId, day, chatChannel).pipe(
            Effect.tap((s) => Effect.sync(() => remember(worker, runId, day, chatChannel, s)).pipe(Effect.zipRight(answered))),
            Effect.catchAll((e) => unanswered(sqlDetail(e)).pipe(Effect.as(asLastSeen(worker, runId, day, chatChannel)))),
            Effect.map((s) => plus(s, ours(worker, runId, nowIso, chatChannel)))
          )
        },
        count: (e) => {
          unwritten.set(e, `${node}-${crypto.randomBytes(12).toString("hex")}`)
        },
        persist: (e) =>
          Effect.suspend(() => {
            const id = unwritten.get(e)
            return id === undefined ? Effect.void : insert(e, id).pipe(
              Effect.catchAll((err) => Effect.logWarning(`fleet: an answer's spending is kept here until the database answers (${sqlDetail(err)})`))
            )
          }),
        stopOnce: (runId) => !stopped.has(runId) && stopped.add(runId).size > 0,
        usage: (since, worker, chatChannel = Option.none()) =>
          sql<UsageRow>`SELECT worker, count(DISTINCT run_id)::int AS runs, count(*)::int AS answers,
              sum(input)::float8 AS input, sum(output)::float8 AS output, sum(cache_read)::float8 AS cache_read,
              sum(cache_write)::float8 AS cache_write, sum(usd)::float8 AS usd, count(*) FILTER (WHERE NOT priced)::int AS unpriced
            FROM roster_spend WHERE day >= ${since} ${Option.isSome(worker) ? sql`AND worker = ${worker.value}` : sql``}
              ${Option.isSome(chatChannel) ? sql`AND chat_channel = ${chatChannel.value}` : sql``}
            GROUP BY worker ORDER BY worker`.withoutTransform.pipe(
            Effect.map((rows) => new Map(rows.map(({ worker: w, ...sum }): [string, UsageSum] => [w, sum]))),
            Effect.orDie
          )
      }
    })
  )

interface UsageRow extends UsageSum {
  readonly worker: string
}

/**
 * The spend ledger an org.toml names, for a reader outside the daemon (`roster usage`): the
 * fleet's database under `[cluster]`, else the machine's files.
 */
export const spendLedgerOf = (org: Org): Layer.Layer<SpendLedger, FleetDbError, HostFiles | Files | Vault> =>
  org.cluster
    ? fleetSpendLedger("reader").pipe(Layer.provide(fleetSqlLayer(org.cluster, { maxConnections: 1 })))
    : SpendLedger.layer
