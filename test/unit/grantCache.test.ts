import { Cause, Deferred, Effect, Exit, Fiber, TestClock, TestContext } from "effect"
import type * as http from "node:http"
import { describe, expect, it } from "vitest"
import { lookAgainNow } from "../../src/fs/stamp.js"
import { GRANT_REFRESH_MS, GRANT_SEEN_MS, grantFor, type GrantSeen, makeGrantCache } from "../../src/gateway/inject/grantCache.js"
import type { Granted, Target } from "../../src/gateway/inject/granted.js"
import { Refusal } from "../../src/gateway/base/refusal.js"

const target = (): Target => ({ caller: { subject: "org/alice", runId: "r1", worker: "alice", taskId: null }, host: "api.example.com", port: 443 })
const granted = {} as Granted
const agent = {} as http.Agent

describe("a terminated connection's grant, kept for its next requests", () => {
  it("serves the connection it was decided for, within its moment only", () => {
    const cache = makeGrantCache()
    const a = target()
    cache.note(a, granted, agent, 1_000)
    expect(cache.fresh(a, 1_000)?.agent).toBe(agent)
    expect(cache.fresh(a, 1_000 + GRANT_SEEN_MS - 1)).toBeDefined()
    expect(cache.fresh(a, 1_000 + GRANT_SEEN_MS)).toBeUndefined()
    // A clock that went back is not trusted either.
    expect(cache.fresh(a, 999)).toBeUndefined()
    // Another connection (another CONNECT, the same caller and host) is decided afresh.
    expect(cache.fresh(target(), 1_000)).toBeUndefined()
  })

  it("is given up when the connection's request is refused, and after lookAgainNow (a run a person just typed)", () => {
    const cache = makeGrantCache()
    const a = target()
    cache.note(a, granted, agent, 1_000)
    cache.forget(a)
    expect(cache.fresh(a, 1_001)).toBeUndefined()
    cache.note(a, granted, agent, 1_000)
    Effect.runSync(lookAgainNow)
    expect(cache.fresh(a, 1_001)).toBeUndefined()
    cache.note(a, granted, agent, 1_002)
    expect(cache.fresh(a, 1_003)).toBeDefined()
  })

  it("is due to be decided again, once at a time, a while before it lapses", () => {
    const cache = makeGrantCache()
    const a = target()
    const entry = cache.note(a, granted, agent, 1_000)
    expect(GRANT_REFRESH_MS).toBeLessThan(GRANT_SEEN_MS)
    expect(cache.refreshDue(a, entry, 1_000 + GRANT_REFRESH_MS - 1)).toBe(false)
    expect(cache.refreshDue(a, entry, 1_000 + GRANT_REFRESH_MS)).toBe(true)
    // One decision under way per connection: the requests meanwhile start none.
    expect(cache.refreshDue(a, entry, 1_000 + GRANT_REFRESH_MS + 10)).toBe(false)
    // Another connection's is its own.
    const b = target()
    expect(cache.refreshDue(b, cache.note(b, granted, agent, 1_000), 1_000 + GRANT_REFRESH_MS)).toBe(true)
    cache.refreshed(a)
    expect(cache.refreshDue(a, entry, 1_000 + GRANT_REFRESH_MS + 20)).toBe(true)
  })

  it("a connection's first request takes the decision begun as its tunnel opened, whatever it came to, rather than making a second", async () => {
    const cache = makeGrantCache()
    // None of the services a decision reads is given: a second decision would die for want of them.
    const firstRequest = (t: Target) => grantFor(t, cache) as unknown as Effect.Effect<GrantSeen, Refusal>
    const [granted_, refused, stale] = [target(), target(), target()]
    const seen = await Effect.gen(function*() {
      const outcomes = yield* Effect.forEach([granted_, refused, stale], (t) =>
        Effect.tap(Deferred.make<GrantSeen, Refusal>(), (outcome) => Effect.sync(() => cache.opens(t, { at: 0, outcome }))))
      const waiting = yield* Effect.forEach([granted_, refused], (t) => Effect.fork(Effect.exit(firstRequest(t))))
      yield* TestClock.adjust(3)
      const entry = cache.note(granted_, granted, agent, 0)
      yield* Deferred.succeed(outcomes[0]!, entry)
      yield* Deferred.fail(outcomes[1]!, new Refusal(403, "no grant"))
      const [got, gotRefused] = yield* Effect.forEach(waiting, Fiber.join)
      // A decision older than a grant may be is made again, not taken.
      yield* Deferred.succeed(outcomes[2]!, entry)
      yield* TestClock.adjust(GRANT_SEEN_MS)
      return { entry, got, gotRefused, gotStale: yield* Effect.exit(firstRequest(stale)) }
    }).pipe(Effect.provide(TestContext.TestContext), Effect.runPromise)
    expect(seen.got).toEqual(Exit.succeed(seen.entry))
    expect(seen.gotRefused).toEqual(Exit.fail(new Refusal(403, "no grant")))
    expect(Exit.isFailure(seen.gotStale) && Cause.isDie(seen.gotStale.cause)).toBe(true)
    // Given once: the connection's later requests decide afresh when their grant lapses.
    expect(cache.takeOpening(granted_)).toBeUndefined()
  })
})
