import { Clock, Effect } from "effect"
import type * as http from "node:http"
import { lookAgainCount } from "../../fs/stamp.js"
import { Gateway } from "../egress/Gateway.js"
import type { Limits } from "../metering/meter.js"
import { grantedCredential, openUpstream, type Target } from "./granted.js"

export type Granted = Effect.Effect.Success<ReturnType<typeof grantedCredential>>

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
 * Per connection (its {@link Target}), the grant its last request was decided under. A cached
 * grant is not used past {@link GRANT_SEEN_MS}, nor after `lookAgainNow` (a handed-over run must
 * see a just-made edit at once). An OAuth login is refreshed five minutes before it expires, so
 * a quarter of a second's reuse never sends one that has lapsed.
 */
export const makeGrantCache = () => {
  const seen = new WeakMap<Target, GrantSeen>()
  return {
    note: (target: Target, granted: Granted, agent: http.Agent, now: number): GrantSeen => {
      const entry: GrantSeen = { granted, agent, at: now, looked: lookAgainCount(), limits: undefined }
      seen.set(target, entry)
      return entry
    },
    fresh: (target: Target, now: number): GrantSeen | undefined => {
      const hit = seen.get(target)
      if (!hit || now - hit.at >= GRANT_SEEN_MS || now < hit.at || hit.looked !== lookAgainCount()) return undefined
      return hit
    },
    forget: (target: Target) => void seen.delete(target)
  }
}

export type GrantCache = ReturnType<typeof makeGrantCache>

/**
 * The grant a request on this connection goes by, and the upstream agent for it: the one its
 * connection was granted a moment ago, or decided now (and kept for the next requests). A new
 * upstream connection is dialled, checked and verified as ever; an idle one of the same rule is reused.
 */
export const grantFor = Effect.fnUntraced(function*(target: Target, grants: GrantCache) {
  const now = yield* Clock.currentTimeMillis
  const seen = grants.fresh(target, now)
  if (seen) return seen
  const granted = yield* grantedCredential(target).pipe(Effect.tapError(() => Effect.sync(() => grants.forget(target))))
  const { authorized, grant, upstream } = granted
  const key = `${upstream.protocol}//${upstream.host}:${upstream.port} ${upstream.routed} ${JSON.stringify(grant)}`
  const agent = yield* (yield* Gateway).upstreamPool.agentFor(key, openUpstream(authorized, upstream))
  return grants.note(target, granted, agent, now)
})
