import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Exit } from "effect"
import fc from "fast-check"
import { ceilingDuration, validateCeiling } from "../../src/box/ceiling.js"

describe("ceilings", () => {
  it("nonsensical minutes never throw and always give a usable bound", () => {
    fc.assert(fc.property(fc.oneof(fc.double(), fc.constantFrom(Number.NaN, -1, 0, 1e300, -1e300, Infinity, -Infinity)), (m) => {
      const d = Duration.toMillis(ceilingDuration(m))
      expect(d).toBeGreaterThanOrEqual(1000)
      expect(d).toBeLessThanOrEqual(2 ** 31 - 1)
    }))
  })

  it("a normal ceiling is what it says", () => {
    expect(Duration.toMillis(ceilingDuration(30))).toBe(30 * 60_000)
  })

  it.effect("validation refuses NaN, zero, negatives and infinities with a fix", () =>
    Effect.gen(function*() {
      for (const bad of [Number.NaN, 0, -5, Infinity, -Infinity]) {
        const exit = yield* Effect.exit(validateCeiling(bad))
        expect(Exit.isFailure(exit)).toBe(true)
      }
      expect(yield* validateCeiling(0.5)).toBe(0.5)
      // Past 14 days is refused (timeBounds.test): a huge ceiling is a typo.
      expect(Exit.isFailure(yield* Effect.exit(validateCeiling(1e300)))).toBe(true)
    }))
})
