import { Schema } from "effect"

/** The exit code of a run whose box failed its preflight (its box is killed, nothing left it). */
export const PREFLIGHT_EXIT = 97

/** Where a box reports its preflight to the gateway (with its run token as `Authorization: Bearer`). */
export const PREFLIGHT_PATH = "/v1/preflight"

/**
 * How long a run's requests are held for its preflight result, from the first moment the
 * gateway hears from the run; no result by then is a failed preflight.
 */
export const PREFLIGHT_WAIT_MS = 5_000

/** The box's egress self-test: the gateway answers as this deployment, and there is no way out around it. */
export const PreflightResult = Schema.Struct({
  ok: Schema.Boolean,
  check: Schema.String,
  detail: Schema.String
})
export type PreflightResult = typeof PreflightResult.Type

/** What the gateway decides when a box held its run's requests past the wait without reporting. */
export const preflightTimedOut: PreflightResult = {
  ok: false,
  check: "timeout",
  detail: `the box reported no preflight result within ${PREFLIGHT_WAIT_MS / 1000} s`
}

/** A run's preflight in words (`roster runs show`); a failure's detail may be the box's own text. */
export const preflightText = (p: PreflightResult | undefined) =>
  p === undefined
    ? "none (the box ended before its check reported: nothing of it left the box)"
    : p.ok ? `passed — ${p.detail}` : `FAILED (${p.check}) — ${p.detail}`
