import { Clock, Deferred, Effect } from "effect"
import type * as http from "node:http"
import { lookAgainCount } from "../../fs/stamp.js"
import { logDefects } from "../../report/defects.js"
import { Gateway } from "../egress/Gateway.js"
import { type Limits, limitsFor } from "../metering/meter.js"
import { connectionGrant, type Granted, openUpstream, type Target } from "./granted.js"

/** What a terminated connection's requests were last granted, and the upstream agent for it. */
export interface GrantSeen {
  readonly granted: Granted
  readonly agent: http.Agent
  readonly at: number
  readonly looked: number
  /** The caller's worker's budgets, as its last model call on this connection read them (for as long as the grant serves). */
  limits: Limits | undefined
}

/**
 * How long a connection's grant, as its last request found it, serves the next ones without
 * being decided again. The decision reads org.toml and the credential through caches that look
 * at the files twice a second; this adds at most a quarter of a second to when an edit is seen
 * by a connection already open (a new connection is always decided afresh), and spares the
 * common request the decision's dozens of steps (docs/PERFORMANCE.md).
 */
export const GRANT_SEEN_MS = 250

/**
 * How old a busy connection's grant is when its next request has it decided again in the
 * background: a connection in use keeps a grant decided within {@link GRANT_SEEN_MS}, and no
 * request waits for the decision (each fourth of a second, one did: a slow request in every few
 * hundred — the gateway's p99).
 */
export const GRANT_REFRESH_MS = 150

/**
 * Per connection (its {@link Target}), the grant its last request was decided under. A cached
 * grant is not used past {@link GRANT_SEEN_MS}, nor after `lookAgainNow` (a handed-over run must
 * see a just-made edit at once). An OAuth login is refreshed five minutes before it expires, so
 * a quarter of a second's reuse never sends one that has lapsed.
 */
export const makeGrantCache = () => {
  const seen = new WeakMap<Target, GrantSeen>()
  const refreshing = new WeakSet<Target>()
  const opening = new WeakMap<Target, Opening>()
  return {
    note: (target: Target, granted: Granted, agent: http.Agent, now: number): GrantSeen => {
      const entry: GrantSeen = { granted, agent, at: now, looked: lookAgainCount(), limits: undefined }
      seen.set(target, entry)
      return entry
    },
    /** The budgets the connection's model calls are metered by while this grant serves (as a call just read them). */
    meteredBy: (entry: GrantSeen, limits: Limits) => {
      entry.limits = limits
    },
    /** True, once, when the connection's grant is due to be decided again (and is not being already). */
    refreshDue: (target: Target, entry: GrantSeen, now: number) => {
      if (now - entry.at < GRANT_REFRESH_MS || refreshing.has(target)) return false
      refreshing.add(target)
      return true
    },
    refreshed: (target: Target) => void refreshing.delete(target),
    /** The decision made as the connection's tunnel opened, given once: to the connection's first request that has no fresh grant. */
    takeOpening: (target: Target) => {
      const hit = opening.get(target)
      opening.delete(target)
      return hit
    },
    opens: (target: Target, decision: Opening) => void opening.set(target, decision),
    fresh: (target: Target, now: number): GrantSeen | undefined => {
      const hit = seen.get(target)
      if (!hit || now - hit.at >= GRANT_SEEN_MS || now < hit.at || hit.looked !== lookAgainCount()) return undefined
      return hit
    },
    forget: (target: Target) => void seen.delete(target)
  }
}

export type GrantCache = ReturnType<typeof makeGrantCache>

type Decided = Effect.Effect.Success<ReturnType<typeof decide>>
type Undecided = Effect.Effect.Error<ReturnType<typeof decide>>

/** A decision begun as a tunnel opened (at `at`), and its outcome once it has one. */
export interface Opening {
  readonly at: number
  readonly outcome: Deferred.Deferred<Decided, Undecided>
}

/**
 * The grant a request on this connection goes by, and the upstream agent for it: the one its
 * connection was granted a moment ago, or decided now (and kept for the next requests). A new
 * upstream connection is dialled, checked and verified as ever; an idle one of the same rule is reused.
 */
export const grantFor = Effect.fnUntraced(function*(target: Target, grants: GrantCache) {
  const now = yield* Clock.currentTimeMillis
  const fresh = grants.fresh(target, now)
  if (fresh) return fresh
  // The decision begun as the tunnel opened is this request's own, made a moment early: awaited
  // rather than made twice, whatever it came to (a grant, a refusal, a defect) — unless it is
  // older than a grant may be, and so made again.
  const opening = grants.takeOpening(target)
  return opening && now - opening.at < GRANT_SEEN_MS ? yield* Deferred.await(opening.outcome) : yield* decide(target, grants, now)
})

/**
 * A terminated connection's grant decided as its tunnel opens, while the box's TLS handshake is
 * under way: its first request then finds it made (one after another, the two took ~1 ms of a new
 * connection's ~7, docs/PERFORMANCE.md). The same decision its first request would make, from the
 * same files, a moment earlier; a refusal is left for that request to get.
 */
export const openGrant = (target: Target, grants: GrantCache) =>
  Effect.gen(function*() {
    const at = yield* Clock.currentTimeMillis
    const outcome = yield* Deferred.make<Decided, Undecided>()
    grants.opens(target, { at, outcome })
    const exit = yield* Effect.exit(decide(target, grants, at))
    yield* Deferred.done(outcome, exit)
    yield* inTheBackground(exit, target, "as its tunnel opened")
  })

/**
 * A decision made in the background, ended: a refusal is the connection's next request's to get;
 * a defect is logged here (a request that takes the decision logs it again, as its own).
 */
const inTheBackground = <R>(decision: Effect.Effect<unknown, unknown, R>, target: Target, when: string) =>
  decision.pipe(
    Effect.ignore,
    logDefects(`gateway: unexpected failure deciding the grant of ${target.host}:${target.port} for run ${target.caller.runId ?? "-"} (${target.caller.subject}) ${when}`)
  )

/** The grant decided now (a refusal forgets the connection's), kept for the connection's next requests. */
const decide = Effect.fnUntraced(function*(target: Target, grants: GrantCache, now: number) {
  const granted = yield* connectionGrant(target).pipe(Effect.tapError(() => Effect.sync(() => grants.forget(target))))
  // One agent per upstream and entry (the dial's key, made as org.toml was compiled): an idle connection of the same entry is reused.
  const dial = granted.intercept.dial
  const agent = yield* (yield* Gateway).upstreamPool.agentFor(dial.key, openUpstream(dial, granted.policy.org.gateway.upstream_ca_file))
  return grants.note(target, granted, agent, now)
})

/**
 * A busy connection's grant decided again before it lapses, in the background (forked by the
 * request that found it due): the same decision a lapsed grant gets, read at the moment it starts,
 * so a request is still served only on a decision at most {@link GRANT_SEEN_MS} old. A refusal
 * forgets the grant and is given by the Effect handler to the connection's next request. The
 * budgets are read again for a connection whose model calls are metered by them.
 */
export const refreshGrant = (target: Target, grants: GrantCache, previous: GrantSeen) =>
  Clock.currentTimeMillis.pipe(
    Effect.flatMap((now) => decide(target, grants, now)),
    Effect.tap((entry) => {
      const { worker } = target.caller
      return previous.limits === undefined || !worker
        ? Effect.void
        : Effect.map(limitsFor(entry.granted.policy.org, worker, target.caller.chatChannel), (limits) => grants.meteredBy(entry, limits))
    }),
    (refresh) => inTheBackground(refresh, target, "in the background"),
    Effect.ensuring(Effect.sync(() => grants.refreshed(target)))
  )
