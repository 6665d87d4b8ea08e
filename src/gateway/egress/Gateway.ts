import { Context, Effect, Option } from "effect"
import { ApprovalBoard } from "../../contract/ApprovalBoard.js"
import { type Approvals, makeApprovals } from "../base/approvals.js"
import type { GatewayEnv } from "../base/env.js"
import { type IdentityCache, makeIdentityCache } from "../base/identify.js"
import { makeOAuthRefresher, type OAuthRefresher } from "../base/oauthFlights.js"
import { makePreflights, type Preflights } from "../base/preflights.js"
import { makeTaintMemo, type TaintMemo } from "../base/taint.js"
import { makeUsageNotes, type UsageNotes } from "../base/usageNotes.js"
import { makeUpstreamPool, type UpstreamPool } from "../upstream/upstreamPool.js"
import { SpendLedger } from "../../spend/SpendLedger.js"
import { makeUpstreamTrust, type UpstreamTrust } from "../upstream/upstreamTrust.js"
import { makeWorkerSettingsCache } from "../../worker/workers.js"

/** What the running gateway holds for its requests: its own addresses, its pools and caches, its ledger. */
export interface GatewayState {
  /** The gateway's own port and addresses: never a target, whatever a rule says (no loops). */
  readonly port: () => number
  readonly addrs: ReadonlyArray<string>
  /** The trust roots for upstream TLS, as one context built once (see makeUpstreamTrust). */
  readonly upstreamTrust: UpstreamTrust
  /** Keep-alive connections to upstreams (see makeUpstreamPool). */
  readonly upstreamPool: UpstreamPool
  /** Taints written lately, so a box repeating a refused request is not a record read each time. */
  readonly taints: TaintMemo
  /** Each worker's worker.toml (its [budget]), decoded again only when it changed: read on every model call. */
  readonly workerSettings: ReturnType<typeof makeWorkerSettingsCache>
  /** What model answers have cost, for the budgets: the machine's files, or the fleet's database. */
  readonly ledger: Context.Tag.Service<SpendLedger>
  /** Model answers' ledger lines and usage events, written after them a moment's worth at a time. */
  readonly usageNotes: UsageNotes<GatewayContext>
  /** Identity files read in the last second (see makeIdentityCache). */
  readonly identities: IdentityCache
  /** OAuth logins being refreshed now (see freshCredential). */
  readonly oauth: OAuthRefresher
  /** Requests held for a person's decision (`[gateway] approvals = "ask"`), and what runs were let through. */
  readonly approvals: Approvals
  /** Each run's preflight: its requests wait for it (see preflightGate). */
  readonly preflights: Preflights
  /** Runs background work in the gateway's own scope (closed with it), past the request that started it; a defect in it is logged (inBackground). */
  readonly fork: (work: Effect.Effect<void, never, GatewayContext>) => void
  /** Runs work in the gateway's own scope and gives its answer as a promise (a plain callback that must wait for it). */
  readonly runPromise: <A>(work: Effect.Effect<A, never, GatewayContext>) => Promise<A>
}

/** What a gateway request handler runs with: the services, and the running gateway itself. */
export type GatewayContext = GatewayEnv | Gateway

/**
 * The running gateway, as a service its request handlers read (`yield* Gateway`) instead of a
 * bag threaded through each call. Built by the gateway's layer (`GatewayLive` in server.ts),
 * which listens, and closes every pool and fiber of it with its scope.
 */
export class Gateway extends Context.Tag("roster/Gateway")<Gateway, GatewayState>() {}

/** The state of a gateway bound at `port()` on `addrs`; `fork` runs work in the caller's scope. */
export const makeGatewayState = (
  addrs: ReadonlyArray<string>,
  port: () => number,
  fork: (work: Effect.Effect<void, never, GatewayContext>) => void,
  runPromise: <A>(work: Effect.Effect<A, never, GatewayContext>) => Promise<A>
) =>
  Effect.gen(function*() {
    const ledger = yield* SpendLedger
    return {
      port,
      addrs,
      upstreamTrust: yield* makeUpstreamTrust,
      upstreamPool: yield* makeUpstreamPool,
      taints: makeTaintMemo(),
      ledger,
      usageNotes: makeUsageNotes<GatewayContext>(ledger, fork),
      workerSettings: makeWorkerSettingsCache(),
      oauth: makeOAuthRefresher(),
      identities: makeIdentityCache(),
      approvals: makeApprovals(Option.getOrUndefined(yield* Effect.serviceOption(ApprovalBoard))),
      preflights: makePreflights(),
      fork,
      runPromise
    } satisfies GatewayState
  })
