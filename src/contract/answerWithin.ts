import { Duration, Effect } from "effect"

/**
 * Gives `e` at most `duration`, then fails with `onTimeout()` at once: `e` is let go and
 * interrupted in the background, not waited on. A plain timeout waits for the interruption, and
 * interrupting a statement whose packets are dropped asks the database to cancel it over a new
 * connection — which hangs just as long (up to 5 s in @effect/sql-pg), so a 1 s beat took six.
 */
export const answerWithin = <E2>(duration: Duration.DurationInput, onTimeout: () => E2) =>
<A, E, R>(e: Effect.Effect<A, E, R>): Effect.Effect<A, E | E2, R> => e.pipe(Effect.disconnect, Effect.timeoutFail({ duration, onTimeout }))
