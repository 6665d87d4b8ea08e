import { Deferred, Effect, Ref } from "effect"

/** A signal many can wait on: `next` taken before a look is completed by any `nudge` after it, so none is missed between the look and the wait. */
export interface Nudge {
  readonly nudge: Effect.Effect<void>
  /** From now: what completes at the next nudge. */
  readonly next: Effect.Effect<Effect.Effect<void>>
}

export const makeNudge: Effect.Effect<Nudge> = Effect.gen(function*() {
  const current = yield* Ref.make(yield* Deferred.make<void>())
  return {
    nudge: Deferred.make<void>().pipe(
      Effect.flatMap((fresh) => Ref.getAndSet(current, fresh)),
      Effect.flatMap((was) => Deferred.succeed(was, undefined)),
      Effect.asVoid
    ),
    next: Effect.map(Ref.get(current), (d) => Deferred.await(d))
  }
})

/** A signal nobody gives (a board without a runner RPC): waiting on it is waiting for the next look. */
export const never: Nudge = { nudge: Effect.void, next: Effect.succeed(Effect.never) }
