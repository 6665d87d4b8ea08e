import { Schema } from "effect"

/**
 * The longest ceiling: 14 days. A Node timer holds at most ~24.8 days (past that it fires at
 * once), and a box left for weeks is never what a person meant.
 */
export const MAX_CEILING_MIN = 14 * 24 * 60

const why = (n: number) => `a ceiling is a positive number of minutes, at most ${MAX_CEILING_MIN} (14 days) (got ${n}), e.g. 30`

/**
 * A run's ceiling in minutes, as every surface takes it — `--ceiling` (worker run, task add), a
 * box's set_tasks, the control API, the web's task form and org.toml's ceilings: a positive
 * number of minutes up to {@link MAX_CEILING_MIN}. One rule, so no surface queues what another refuses.
 */
export const CeilingMinutes = Schema.Number.pipe(
  Schema.filter((n) => (Number.isFinite(n) && n > 0 && n <= MAX_CEILING_MIN) || why(n)),
  Schema.annotations({ identifier: "CeilingMinutes" })
)

/**
 * A span of time read from a person or a box (org.toml's waits, a delay): positive, finite, and at
 * most `max` of `unit` — the message says the bound, so the fix is in it.
 */
export const Span = (unit: "seconds" | "minutes", max: number, maxWords: string) =>
  Schema.Number.pipe(Schema.filter((n) => (Number.isFinite(n) && n > 0 && n <= max) || `a positive number of ${unit}, at most ${max} (${maxWords}) (got ${n})`))

/** Why `minutes` is no ceiling, or undefined when it is one. */
export const ceilingProblem = (minutes: number): string | undefined => (Schema.is(CeilingMinutes)(minutes) ? undefined : why(minutes))
