import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { type SpanTime, spanTimesTracer } from "../../src/report/spanTimes.js"

describe("span times (ROSTER_TRACE)", () => {
  it.live("keeps each named step with its parent and how long it took", () => {
    const times: Array<SpanTime> = []
    const inner = Effect.fn("test.inner")(function*() {
      yield* Effect.sleep("30 millis")
    })
    const outer = Effect.fn("test.outer")(function*() {
      yield* inner()
      yield* inner()
    })
    return outer().pipe(
      Effect.withTracer(spanTimesTracer(times)),
      Effect.andThen(() => {
        expect(times.map((t) => [t.name, t.parent])).toEqual([["test.inner", "test.outer"], ["test.inner", "test.outer"], ["test.outer", null]])
        const [first, second, whole] = times as [SpanTime, SpanTime, SpanTime]
        expect(first.ms).toBeGreaterThanOrEqual(25)
        expect(whole.ms).toBeGreaterThanOrEqual(first.ms + second.ms)
        expect(second.startMs).toBeGreaterThanOrEqual(first.startMs + first.ms - 1)
        // From the process start, not the epoch.
        expect(whole.startMs).toBeLessThan(performance.now() + 1)
        expect(whole.startMs).toBeGreaterThan(0)
      })
    )
  })
})
