import { FileSystem } from "@effect/platform"
import { Clock, Effect, Option, Schema } from "effect"
import type { IncomingHttpHeaders } from "node:http"
import { IdentityRecord, identityFile, TOKEN_PATTERN } from "../../contract/identity.js"
import { Paths, layout } from "../../config/Paths.js"
import { isLoopback } from "../../contract/addresses.js"
import { RunFence } from "../../run/RunFence.js"
import { LiveRuns } from "./LiveRuns.js"

export interface Caller {
  readonly subject: string
  readonly runId: string | null
  readonly worker: string | null
  readonly taskId: string | null
  /** The chat channel the run's spending is charged to (`slack:<id>`), when it is a chat session's or its work's. */
  readonly chatChannel?: string | undefined
}

/** A caller whose token names a run and a worker (a box); host callers have neither. */
export type RunCaller = Caller & { readonly runId: string; readonly worker: string }

export type Identification =
  | { readonly ok: true; readonly caller: Caller }
  | { readonly ok: false; readonly reason: string; readonly why: "no_token" | "run_ended" }
  /** A known run whose node stands down (cut off from its fleet's database): answered 503, not 407. */
  | { readonly ok: false; readonly reason: string; readonly why: "cut_off" }
  /** A warm box's token, bound to no run yet: refused (403) for everything but its preflight report. */
  | { readonly ok: false; readonly reason: string; readonly why: "warm" }

/** The status an egress refusal of an unidentified caller gets: a node cut off 503, a warm box 403, else 407 (send a token). */
export const refusalStatus = (why: Exclude<Identification, { ok: true }>["why"]) =>
  why === "cut_off" ? 503 : why === "warm" ? 403 : 407

/** The run token from `Proxy-Authorization: Basic base64(<token>:x)`; the password is never read. */
export const tokenFrom = (headers: IncomingHttpHeaders): string | undefined => {
  const value = headers["proxy-authorization"]
  if (typeof value !== "string") return undefined
  const m = /^\s*basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(value)
  if (!m?.[1]) return ""
  const decoded = Buffer.from(m[1], "base64").toString("utf8")
  const colon = decoded.indexOf(":")
  return colon < 0 ? decoded : decoded.slice(0, colon)
}

/**
 * Identity files read lately, by path, for 0.75 s: a busy box's requests cost a read or two a
 * second, not one each; a token whose file is gone is refused within the second (and at once
 * when its run has ended: that is checked on every request).
 */
export const makeIdentityCache = (ttlMs = 750) => {
  const known = new Map<string, { readonly record: typeof IdentityRecord.Type; readonly until: number }>()
  return {
    get: (file: string, now: number) => {
      const hit = known.get(file)
      return hit && hit.until > now ? hit.record : undefined
    },
    set: (file: string, record: typeof IdentityRecord.Type, now: number) => {
      if (known.size > 10_000) known.clear()
      known.set(file, { record, until: now + ttlMs })
    }
  }
}
export type IdentityCache = ReturnType<typeof makeIdentityCache>

/**
 * Who is calling: a known run token names its worker and run; no token at all is a host-side
 * caller ("org"), accepted only from loopback. Everything else is refused (407).
 * Untraced: it runs on every request the gateway handles, and a traced step (a span and a stack
 * capture per call) measured 13–26 µs against 1–3 µs untraced (docs/PERFORMANCE.md).
 */
export const identify = Effect.fnUntraced(function*(headers: IncomingHttpHeaders, remote: string | undefined, cache?: IdentityCache) {
  const token = tokenFrom(headers)
  if (token === undefined) {
    return isLoopback(remote)
      ? { ok: true, caller: { subject: "org", runId: null, worker: null, taskId: null } } satisfies Identification
      : { ok: false, reason: "no run token", why: "no_token" } satisfies Identification
  }
  return yield* lookupToken(token, cache)
})

/**
 * A run token's identity, honoured only while its run is live. Untraced, as identify. A warm box's
 * token (bound to no run) is honoured only where `warmAllowed` (its preflight report), and never
 * cached: its claim rewrites the record, and the run's first request must see the bound one.
 */
export const lookupToken = Effect.fnUntraced(function*(token: string, cache?: IdentityCache, warmAllowed = false) {
  if (!TOKEN_PATTERN.test(token)) return { ok: false, reason: "malformed run token", why: "no_token" } satisfies Identification
  const fs = yield* FileSystem.FileSystem
  const file = identityFile(layout(yield* Paths).identityDir, token)
  const now = yield* Clock.currentTimeMillis
  const cached = cache?.get(file, now)
  const record = cached ? Option.some(cached) : yield* fs.readFileString(file).pipe(
    Effect.flatMap((text) => Effect.try(() => JSON.parse(text) as unknown)),
    Effect.flatMap(Schema.decodeUnknown(IdentityRecord)),
    Effect.option
  )
  if (record._tag === "None") return { ok: false, reason: "unknown run token", why: "no_token" } satisfies Identification
  const r = record.value
  if (r.warm === true && !warmAllowed) {
    return { ok: false, reason: "this box is warm: no run has claimed it yet, and until one does nothing of it leaves the box", why: "warm" } satisfies Identification
  }
  if (!cached && r.warm !== true) cache?.set(file, r, now)
  if (!(yield* (yield* LiveRuns).isLive(r.run_id))) return { ok: false, reason: "the run of this token has ended", why: "run_ended" } satisfies Identification
  // A node that may soon see its tasks re-run elsewhere lets none of its boxes act: not a model call, not an action.
  const down = yield* (yield* RunFence).standsDown
  if (down !== null) return { ok: false, reason: down, why: "cut_off" } satisfies Identification
  return { ok: true, caller: { subject: r.subject, runId: r.run_id, worker: r.worker, taskId: r.task_id, chatChannel: r.chat_channel } } satisfies Identification
})
