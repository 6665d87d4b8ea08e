import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Fiber, Option, TestClock } from "effect"
import { PREFLIGHT_WAIT_MS } from "../../src/contract/preflight.js"
import { makePreflights } from "../../src/gateway/base/preflights.js"

const passed = { ok: true, check: "all", detail: "gateway answers" }

describe("a run's preflight in the gateway (its requests wait for it)", () => {
  it.effect("a waiting request gets the box's result as soon as it is in", () =>
    Effect.gen(function*() {
      const preflights = makePreflights()
      const now = yield* Clock.currentTimeMillis
      const { entry, fresh } = yield* preflights.entry("run-1", now)
      expect(fresh).toBe(true)
      const waiting = yield* Effect.fork(preflights.result(entry, now))
      yield* TestClock.adjust("1 second")
      expect(yield* preflights.settle(entry, passed)).toBe(true)
      expect(yield* Fiber.join(waiting)).toEqual(Option.some(passed))
      // The same run is the same entry: later requests go straight through.
      const again = yield* preflights.entry("run-1", now + 2_000)
      expect(again.fresh).toBe(false)
      expect(yield* preflights.result(again.entry, now + 2_000)).toEqual(Option.some(passed))
    }))

  it.effect("the wait runs from the first time the gateway hears of the run, not from each request", () =>
    Effect.gen(function*() {
      const preflights = makePreflights()
      const start = yield* Clock.currentTimeMillis
      const { entry } = yield* preflights.entry("run-2", start)
      yield* TestClock.adjust(PREFLIGHT_WAIT_MS - 1_000)
      const later = yield* Clock.currentTimeMillis
      const second = yield* Effect.fork(preflights.result((yield* preflights.entry("run-2", later)).entry, later))
      yield* TestClock.adjust("999 millis")
      expect(second.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 millis")
      expect(yield* Fiber.join(second)).toEqual(Option.none())
      expect(entry.deadline).toBe(start + PREFLIGHT_WAIT_MS)
    }))

  it.effect("the first result decides: a later one (the agent's, say) changes nothing", () =>
    Effect.gen(function*() {
      const preflights = makePreflights()
      const { entry } = yield* preflights.entry("run-3", 0)
      expect(yield* preflights.settle(entry, { ok: false, check: "egress", detail: "a way out" })).toBe(true)
      expect(yield* preflights.settle(entry, passed)).toBe(false)
      expect(yield* preflights.result(entry, 0)).toEqual(Option.some({ ok: false, check: "egress", detail: "a way out" }))
    }))
})
