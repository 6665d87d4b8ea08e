import { Cause, Effect } from "effect"

/**
 * For work that runs on its own (a fiber no one awaits): its failures it handles itself, and a
 * defect (a bug) is logged with `message` instead of being lost with its fiber. Interruption (its
 * scope closing) is not one.
 */
export const logDefects = (message: string) => <R>(work: Effect.Effect<void, never, R>): Effect.Effect<void, never, R> =>
  work.pipe(Effect.catchAllCause((cause) => (Cause.isInterruptedOnly(cause) ? Effect.void : Effect.logError(message, cause))))
