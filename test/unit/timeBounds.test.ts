import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Exit } from "effect"
import { validateCeiling } from "../../src/box/ceiling.js"
import { ceilingProblem, MAX_CEILING_MIN } from "../../src/config/ceiling.js"
import { decodeToml } from "../../src/config/decode.js"
import { OrgSchema } from "../../src/config/schema.js"
import { MAX_AT_DAYS, runAt } from "../../src/supervisor/queueTask.js"

const NOW = Date.parse("2026-12-07T10:00:00Z")
const EXTREME = [Number.MAX_VALUE, 1e300, 1e15, Infinity, -Infinity, Number.NaN, -1, 0]

describe("every time read from a person or a box is bounded, the bound in the message", () => {
  it("--at: a year ahead at most; nothing out of a date's range throws", () => {
    for (const at of ["+99999999999999d", "+99999999999999999999999s", `+${MAX_AT_DAYS + 1}d`, "+9000h", "9999-12-31T00:00:00Z"]) {
      const r = runAt(at, NOW)
      expect(typeof r === "object" && r.why, at).toMatch(new RegExp(`at most ${MAX_AT_DAYS} days ahead \\(\\+${MAX_AT_DAYS}d\\)$`))
    }
    for (const at of ["+1e9d", "tomorrow", "", "+", "+-1d", "2026-13-45T99:00:00Z", "275760-09-13T00:00:01Z"]) {
      expect(typeof runAt(at, NOW) === "object", at).toBe(true)
    }
    expect(runAt(`+${MAX_AT_DAYS}d`, NOW)).toBe(new Date(NOW + MAX_AT_DAYS * 86_400_000).toISOString())
    expect(runAt("+30m", NOW)).toBe("2026-12-07T10:30:00.000Z")
    // A time already past runs as soon as it can: it is not refused.
    expect(runAt("2026-12-01T00:00:00Z", NOW)).toBe("2026-12-01T00:00:00.000Z")
  })

  it.effect("ceilings (--ceiling, set_tasks, the API, the web): positive and at most 14 days", () =>
    Effect.gen(function*() {
      for (const bad of [...EXTREME, MAX_CEILING_MIN + 1]) {
        const exit = yield* Effect.exit(validateCeiling(bad))
        expect(Exit.isFailure(exit), String(bad)).toBe(true)
        expect(ceilingProblem(bad), String(bad)).toContain(`at most ${MAX_CEILING_MIN} (14 days)`)
      }
      expect(yield* validateCeiling(MAX_CEILING_MIN)).toBe(MAX_CEILING_MIN)
      expect(yield* validateCeiling(0.5)).toBe(0.5)
    }))

  it("org.toml's durations: each refused past its bound, naming its key and the bound", () => {
    const keys: ReadonlyArray<readonly [string, string, string]> = [
      ["box", "ceiling_min", "at most 20160 (14 days)"],
      ["box", "session_ceiling_min", "at most 20160 (14 days)"],
      ["box", "turn_ceiling_min", "at most 20160 (14 days)"],
      ["box", "idle_secs", "at most 604800 (7 days)"],
      ["box", "warm_idle_min", "at most 10080 (7 days)"],
      ["gateway", "approval_wait_s", "3600"],
      ["supervisor", "retry_backoff_s", "3600"],
      ["supervisor", "keep_days", "3650"]
    ]
    for (const [section, key, bound] of keys) {
      for (const value of ["1e300", "inf", "nan", "-1"]) {
        const r = decodeToml(OrgSchema, "/x/org.toml", `[${section}]\n${key} = ${value}\n`)
        expect(Either.isLeft(r), `${key} = ${value}`).toBe(true)
        if (Either.isLeft(r)) {
          const problem = r.left.problems.find((p) => p.key === `${section}.${key}`)?.problem ?? ""
          expect(problem, `${key} = ${value}: ${r.left.message}`).not.toBe("")
          if (value === "1e300") expect(problem, key).toContain(bound)
        }
      }
    }
    // A chat channel's session: its idle wait and its ceiling.
    const chat = (line: string) => `[[chat]]\nprovider = "slack"\nconnection = "slack"\n[[chat.channel]]\nid = "C1"\nworker = "alice"\nallow_users = ["U1"]\n${line}\n`
    for (const [line, bound] of [["idle_min = 1e300", "7 days"], ["ceiling_min = 1e300", "14 days"]] as const) {
      const r = decodeToml(OrgSchema, "/x/org.toml", chat(line))
      expect(Either.isLeft(r) && r.left.message, line).toContain(bound)
    }
  })
})
