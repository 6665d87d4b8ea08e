import { Clock, Context, Effect, Layer } from "effect"
import { BoxBackend } from "../../backend/BoxBackend.js"

/**
 * Is this run's box alive? A token is honoured only while it is: a stale identity file (a
 * runner killed with -9) opens nothing once its container is gone.
 */
export class LiveRuns extends Context.Tag("roster/LiveRuns")<LiveRuns, {
  readonly isLive: (runId: string) => Effect.Effect<boolean>
}>() {
  /** Asks the engine, remembering a "yes" for half a second so a busy box costs one list call per 500 ms. */
  static readonly layer = Layer.effect(
    LiveRuns,
    Effect.gen(function*() {
      const backend = yield* BoxBackend
      const seen = new Map<string, number>()
      return {
        isLive: (runId) =>
          Effect.gen(function*() {
            const now = yield* Clock.currentTimeMillis
            const at = seen.get(runId)
            if (at !== undefined && now - at < 500) return true
            // An engine that does not answer shows no box: the token is refused (fail closed), and the next request asks again.
            const live = (yield* backend.list({ runId }).pipe(Effect.orElseSucceed(() => []))).length > 0
            if (live) seen.set(runId, now)
            else seen.delete(runId)
            return live
          })
      }
    })
  )

  static readonly layerTest = (live: (runId: string) => boolean) =>
    Layer.succeed(LiveRuns, { isLive: (runId) => Effect.sync(() => live(runId)) })
}
