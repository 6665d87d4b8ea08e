import { Context, Deferred, Effect, Fiber, Layer, Option } from "effect"

/**
 * A person's second Ctrl-C. The first interrupts the run and its finalizers clean up; long
 * clean-up work (a store snapshot) races this, so a second signal cuts it short instead of
 * killing the process with a record half written. A third signal exits at once.
 */
export class Hurry extends Context.Tag("roster/Hurry")<Hurry, {
  /** Completes when hurrying is asked for; never, for embedders that do not wire signals. */
  readonly requested: Effect.Effect<void>
}>() {
  static readonly layerNever = Layer.succeed(Hurry, { requested: Effect.never })

  /** SIGINT/SIGTERM counting for the CLI: the second asks for haste, the third exits (130/143). */
  static readonly layerSignals = Layer.scoped(
    Hurry,
    Effect.gen(function*() {
      const hurry = yield* Deferred.make<void>()
      let count = 0
      const onSignal = (signal: NodeJS.Signals) => {
        count++
        if (count === 2) Deferred.unsafeDone(hurry, Effect.void)
        if (count >= 3) process.exit(signal === "SIGTERM" ? 143 : 130)
      }
      yield* Effect.acquireRelease(
        Effect.sync(() => {
          process.on("SIGINT", onSignal)
          process.on("SIGTERM", onSignal)
        }),
        () =>
          Effect.sync(() => {
            process.off("SIGINT", onSignal)
            process.off("SIGTERM", onSignal)
          })
      )
      return { requested: Deferred.await(hurry) }
    })
  )

  /** For tests: a Deferred the test completes to play the second Ctrl-C. */
  static readonly layerTest = (signal: Deferred.Deferred<void>) => Layer.succeed(Hurry, { requested: Deferred.await(signal) })
}

/**
 * Clean-up a first signal must let finish and a second may cut: `effect` raced against Hurry (none
 * when no signals are wired), in a daemon fiber the caller waits for. A fiber of its own because an
 * interrupt reaches every child of the interrupted fiber, even in a finalizer; interruptible because a
 * finalizer is not and a fork inherits that, yet the race must stop its loser. None when hurried.
 */
export const untilHurried = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Effect.serviceOption(Hurry), (hurry) => {
    const hurried = Option.match(hurry, { onNone: () => Effect.never, onSome: (h) => Effect.as(h.requested, Option.none<A>()) })
    return Effect.forkDaemon(Effect.interruptible(Effect.raceFirst(Effect.asSome(effect), hurried))).pipe(Effect.flatMap(Fiber.join))
  })
