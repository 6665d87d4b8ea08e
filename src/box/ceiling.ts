import { Duration, Effect, Schema } from "effect"
import { ceilingProblem, MAX_CEILING_MIN } from "../config/ceiling.js"

/** A ceiling that is not a positive number of minutes (or absurdly long). */
export class InvalidCeiling extends Schema.TaggedError<InvalidCeiling>()("InvalidCeiling", {
  value: Schema.String
}) {
  override get message() {
    return `--ceiling wants a positive number of minutes, at most ${MAX_CEILING_MIN} (14 days) (got ${this.value}), e.g. --ceiling 30`
  }
}

/** `minutes` if it is a ceiling by the one rule ({@link CeilingMinutes}), else InvalidCeiling. */
export const validateCeiling = (minutes: number): Effect.Effect<number, InvalidCeiling> =>
  ceilingProblem(minutes) === undefined ? Effect.succeed(minutes) : Effect.fail(new InvalidCeiling({ value: String(minutes) }))

// Node timers fire at once past 2^31-1 ms, which would turn a huge ceiling into an instant
// kill; a sub-second one would race the box's own start. Clamp instead of trusting the caller.
const MAX_TIMER_MS = 2 ** 31 - 1

/** Minutes as a wall-clock bound that never throws: NaN and negatives floor to 1 s, huge values cap at ~24.8 days. */
export const ceilingDuration = (minutes: number): Duration.Duration => {
  const ms = Number.isNaN(minutes) ? 0 : minutes * 60_000
  return Duration.millis(Math.min(Math.max(ms, 1000), MAX_TIMER_MS))
}
