import { Context, Deferred, Effect, Layer } from "effect"

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
