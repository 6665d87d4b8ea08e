import type { Effect } from "effect"
import type * as http from "node:http"
import { lookAgainCount } from "../../fs/stamp.js"
import type { grantedCredential, Target } from "./granted.js"

export type Granted = Effect.Effect.Success<ReturnType<typeof grantedCredential>>

/** What a terminated connection's requests were last granted, and the upstream agent for it. */
export interface GrantSeen {
  readonly granted: Granted
  readonly agent: http.Agent
  readonly at: number
  readonly looked: number
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
    note: (target: Target, granted: Granted, agent: http.Agent, now: number) =>
      void seen.set(target, { granted, agent, at: now, looked: lookAgainCount() }),
    fresh: (target: Target, now: number): GrantSeen | undefined => {
      const hit = seen.get(target)
      if (!hit || now - hit.at >= GRANT_SEEN_MS || now < hit.at || hit.looked !== lookAgainCount()) return undefined
      return hit
    },
    forget: (target: Target) => void seen.delete(target)
  }
}

export type GrantCache = ReturnType<typeof makeGrantCache>
