import { Schema } from "effect"

const why = (n: number) => `a ceiling is a positive number of minutes (got ${n}), e.g. 30`

/**
 * A run's ceiling in minutes, as every surface takes it — `--ceiling` (worker run, task add), a
 * box's set_tasks, the control API and the web's task form: a positive, finite number of minutes
 * (one past what a timer holds is clamped where it is armed, never refused). One rule, so no
 * surface queues what another refuses.
 */
export const CeilingMinutes = Schema.Number.pipe(
  Schema.filter((n) => (Number.isFinite(n) && n > 0) || why(n)),
  Schema.annotations({ identifier: "CeilingMinutes" })
)

/** Why `minutes` is no ceiling, or undefined when it is one. */
export const ceilingProblem = (minutes: number): string | undefined => (Schema.is(CeilingMinutes)(minutes) ? undefined : why(minutes))
