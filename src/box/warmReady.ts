import { FileSystem } from "@effect/platform"
import { Deferred, Effect, Fiber, Option, Schema } from "effect"
import { Paths } from "../config/Paths.js"
import { eventsIn, foldEvents } from "../run/events.js"

/** A warm box no run may take: its preflight failed or never came in. */
export class WarmBoxUnready extends Schema.TaggedError<WarmBoxUnready>()("WarmBoxUnready", {
  worker: Schema.String,
  why: Schema.String
}) {
  override get message() {
    return `the warm box of ${this.worker} was not ready: ${this.why}`
  }
}

/** The box's preflight as the gateway recorded it in the folder's events (a fleet node's in its own file): passed or not, once it is in. */
const preflightRecorded = (runDir: string) =>
  Effect.gen(function*() {
    const { readRunEvents } = eventsIn(yield* FileSystem.FileSystem)
    const events = yield* readRunEvents(runDir, (yield* Paths).fleet !== undefined)
    return Option.map(Option.fromNullable(foldEvents(events).preflight), (result) => result.ok)
  })

/** How long a warm box's preflight may take (its own checks give up after 5 s each). */
const PREFLIGHT_WAIT = "30 seconds"

/**
 * Until the gateway has the warm box's preflight, passed: only then is the box handed to a run. The
 * run takes the box under its own run id, and the gateway finds a run's preflight in the run's folder —
 * a report still on its way when the box changed hands would be recorded under the old id, and the
 * run's first request would wait for one that never comes.
 */
export const preflightPassed = (
  worker: string,
  runDir: string,
  failed: Deferred.Deferred<string>,
  exit: Fiber.Fiber<unknown>
) =>
  Effect.gen(function*() {
    for (;;) {
      const recorded = yield* preflightRecorded(runDir)
      if (Option.isSome(recorded)) return recorded.value ? undefined : yield* Effect.fail("the gateway recorded its preflight as failed")
      const why = yield* Deferred.poll(failed)
      if (Option.isSome(why)) return yield* Effect.fail(yield* why.value)
      if (Option.isSome(yield* Fiber.poll(exit))) return yield* Effect.fail("its box exited before its preflight was in")
      yield* Effect.sleep("20 millis")
    }
  }).pipe(
    Effect.timeoutFail({ duration: PREFLIGHT_WAIT, onTimeout: () => `its preflight was not in after ${PREFLIGHT_WAIT}` }),
    Effect.mapError((why) => new WarmBoxUnready({ worker, why }))
  )
