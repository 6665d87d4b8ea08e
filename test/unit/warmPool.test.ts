import { describe, expect, it } from "@effect/vitest"
import { Context, Deferred, Effect, Layer, Option, Ref, Schema, Scope, TestClock } from "effect"
import type { PreparedRun } from "../../src/box/prepareRun.js"
import { ONE_SHOT, type WarmBox, type WarmShape } from "../../src/box/warmBox.js"
import { OrgConfig } from "../../src/config/OrgConfig.js"
import { OrgSchema } from "../../src/config/schema.js"
import { WarmPool } from "../../src/runner/WarmPool.js"

/** A warm box as the pool sees it (no engine): its run id, worker, when it was made, and whether its scope was closed. */
const fakeBox = (worker: string, shape: WarmShape, n: number, closed: Ref.Ref<ReadonlyArray<string>>) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const runId = `2026-12-05-00-00-00-${n.toString(16).padStart(8, "0")}`
    yield* Scope.addFinalizer(scope, Ref.update(closed, (c) => [...c, runId]))
    return { runId, worker, shape, madeFrom: "digest", preparedAt: n, scope } as unknown as WarmBox
  })

/** The pool over fake boxes: `fits` answers what the test says; every close is kept in `closed`. */
type BoxKeys = { readonly warm_max?: number; readonly warm_idle_min?: number; readonly warm?: "recent" | "off" }

/** An org.toml whose `[box]` the test can change while the pool runs (a person editing it). */
const orgOf = (box: Ref.Ref<BoxKeys>) =>
  OrgConfig.fromSnapshot(Effect.map(Ref.get(box), (b) => Schema.decodeUnknownSync(OrgSchema)({ box: b })))

const pool = (
  box: BoxKeys | Ref.Ref<BoxKeys>,
  fits: Ref.Ref<boolean>,
  paused: Ref.Ref<boolean> | undefined = undefined
) =>
  Effect.gen(function*() {
    const closed = yield* Ref.make<ReadonlyArray<string>>([])
    const made = yield* Ref.make(0)
    const org = Ref.RefTypeId in box ? box : yield* Ref.make(box)
    const layer = WarmPool.layerTest({
      prepare: (worker, shape) => Ref.updateAndGet(made, (n) => n + 1).pipe(Effect.flatMap((n) => fakeBox(worker, shape, n, closed)), Effect.map(Option.some)),
      // A fitting box's run, as the pool hands it on: the pool only passes it, so its fields are not the test's.
      fits: (warm) => Ref.get(fits).pipe(Effect.map((f) => (f ? Option.some({ runId: warm.runId } as PreparedRun) : Option.none()))),
      ...(paused ? { paused: Ref.get(paused) } : {})
    }).pipe(Layer.provide(orgOf(org)))
    return { layer, closed }
  })

const workersOf = (ready: ReadonlyArray<{ readonly worker: string }>) => ready.map((r) => r.worker)

/** The pool built in the test's scope (with `Layer.build`: it lives as long as the test), and what it closed. */
const started = (box: Parameters<typeof pool>[0], fits: Ref.Ref<boolean>, paused?: Ref.Ref<boolean>) =>
  Effect.gen(function*() {
    const { closed, layer } = yield* pool(box, fits, paused)
    return { closed, p: Context.get(yield* Layer.build(layer), WarmPool) }
  })

/** Lets the pool's own fibers run what was asked of them . */
const settle = Effect.repeatN(Effect.yieldNow(), 50)

describe("the warm pool (its timing, room and recycling, over fake boxes and the TestClock)", () => {
  it.scoped("a warm box no run takes within warm_idle_min is recycled: out of the pool, its scope closed", () =>
    Effect.gen(function*() {
      const fits = yield* Ref.make(true)
      const { closed, p } = yield* started({ warm_idle_min: 10 }, fits)
      yield* p.refill("alice", ONE_SHOT)
      yield* settle
      expect(workersOf(yield* p.ready)).toEqual(["alice"])
      yield* TestClock.adjust("9 minutes")
      yield* settle
      expect(workersOf(yield* p.ready)).toEqual(["alice"])
      expect(yield* Ref.get(closed)).toEqual([])
      yield* TestClock.adjust("1 minute")
      yield* settle
      expect(workersOf(yield* p.ready)).toEqual([])
      expect(yield* Ref.get(closed)).toHaveLength(1)
    }))

  it.scoped("a take gives the box once; one that does not fit the run is recycled and not given", () =>
    Effect.gen(function*() {
      const fits = yield* Ref.make(true)
      const { closed, p } = yield* started({}, fits)
      yield* p.refill("alice", ONE_SHOT)
      yield* settle
      const taken = yield* p.take("alice", ONE_SHOT, {})
      // With the run its check prepared: the run is made from what was checked.
      expect(Option.map(taken, (t) => t.run.runId)).toEqual(Option.map(taken, (t) => t.runId))
      expect(Option.isSome(taken)).toBe(true)
      expect(Option.isNone(yield* p.take("alice", ONE_SHOT, {}))).toBe(true)
      yield* p.refill("alice", ONE_SHOT)
      yield* settle
      yield* Ref.set(fits, false)
      expect(Option.isNone(yield* p.take("alice", ONE_SHOT, {}))).toBe(true)
      yield* settle
      // The misfit's scope is closed; the taken one's is its taker's to close.
      expect(yield* Ref.get(closed)).toHaveLength(1)
      expect(workersOf(yield* p.ready)).toEqual([])
    }))

  it.scoped("a take hands the box over under the run id its taker gives (a fleet claim's), and one whose hand-over fails is recycled, not given", () =>
    Effect.gen(function*() {
      const closed = yield* Ref.make<ReadonlyArray<string>>([])
      const made = yield* Ref.make(0)
      const handing = yield* Ref.make(true)
      const asked = yield* Ref.make<ReadonlyArray<string | undefined>>([])
      const layer = WarmPool.layerTest({
        prepare: (worker, shape) => Ref.updateAndGet(made, (n) => n + 1).pipe(Effect.flatMap((n) => fakeBox(worker, shape, n, closed)), Effect.map(Option.some)),
        fits: (_warm, _shape, _limits, runId) =>
          Ref.update(asked, (a) => [...a, runId]).pipe(Effect.as(Option.some({ runId: runId ?? "2026-12-06-22-00-00-0000ffff" } as PreparedRun))),
        handOver: (warm, run) =>
          Effect.flatMap(Ref.get(handing), (ok) =>
            ok
              ? Effect.succeed({ ...warm, run, runId: run.runId, madeAs: warm.runId, renamed: Effect.void })
              : Effect.fail({ message: "the engine refused the rename" }))
      }).pipe(Layer.provide(orgOf(yield* Ref.make<BoxKeys>({}))))
      const p = Context.get(yield* Layer.build(layer), WarmPool)
      yield* p.refill("alice", ONE_SHOT)
      yield* settle
      const claim = "2026-12-06-22-00-00-0000c1a1"
      const taken = yield* p.take("alice", ONE_SHOT, {}, claim)
      expect(Option.map(taken, (t) => [t.runId, t.run.runId, t.madeAs])).toEqual(Option.some([claim, claim, "2026-12-05-00-00-00-00000001"]))
      expect(yield* Ref.get(asked)).toEqual([claim])
      yield* p.refill("alice", ONE_SHOT)
      yield* settle
      yield* Ref.set(handing, false)
      expect(Option.isNone(yield* p.take("alice", ONE_SHOT, {}))).toBe(true)
      yield* settle
      // The box that could not be handed over is closed (recycled), not left out of the pool unowned.
      expect(yield* Ref.get(closed)).toEqual(["2026-12-05-00-00-00-00000002"])
      expect(workersOf(yield* p.ready)).toEqual([])
    }))

  it.scoped("at warm_max the oldest gives its place to the worker that ran last; warm = off makes none", () =>
    Effect.gen(function*() {
      const fits = yield* Ref.make(true)
      const { closed, p } = yield* started({ warm_max: 1 }, fits)
      yield* p.refill("alice", ONE_SHOT)
      yield* settle
      yield* p.refill("bob", ONE_SHOT)
      yield* settle
      expect(workersOf(yield* p.ready)).toEqual(["bob"])
      expect(yield* Ref.get(closed)).toHaveLength(1)
      const { p: q } = yield* started({ warm: "off" }, fits)
      yield* q.refill("alice", ONE_SHOT)
      yield* settle
      expect(workersOf(yield* q.ready)).toEqual([])
    }))

  it.scoped("a warm box made before warm was turned off is not taken: the take recycles it and the run starts its own", () =>
    Effect.gen(function*() {
      const fits = yield* Ref.make(true)
      const box = yield* Ref.make<BoxKeys>({ warm: "recent" })
      const { closed, p } = yield* started(box, fits)
      yield* p.refill("alice", ONE_SHOT)
      yield* settle
      expect(workersOf(yield* p.ready)).toEqual(["alice"])
      yield* Ref.set(box, { warm: "off" })
      expect(Option.isNone(yield* p.take("alice", ONE_SHOT, {}))).toBe(true)
      yield* settle
      expect(yield* Ref.get(closed)).toHaveLength(1)
      expect(workersOf(yield* p.ready)).toEqual([])
    }))

  it.scoped("a fenced or cut-off fleet node makes none; once it may again, it does", () =>
    Effect.gen(function*() {
      const fits = yield* Ref.make(true)
      const paused = yield* Ref.make(true)
      const { closed, p } = yield* started({}, fits, paused)
      yield* p.refill("alice", ONE_SHOT)
      yield* settle
      expect(workersOf(yield* p.ready)).toEqual([])
      yield* Ref.set(paused, false)
      yield* p.refill("alice", ONE_SHOT)
      yield* settle
      expect(workersOf(yield* p.ready)).toEqual(["alice"])
      expect(yield* Ref.get(closed)).toEqual([])
    }))

  it.scoped("a worker's box is of its last run's kind: a run of another kind has the old box recycled and one of its own made", () =>
    Effect.gen(function*() {
      const fits = yield* Ref.make(true)
      const { closed, p } = yield* started({}, fits)
      yield* p.refill("alice", ONE_SHOT)
      yield* settle
      yield* p.refill("alice", ONE_SHOT)
      yield* settle
      expect(yield* Ref.get(closed)).toEqual([])
      yield* p.refill("alice", { kind: "session", chatSend: "slack", termSend: false, channel: "slack-c0team" })
      yield* settle
      expect(yield* Ref.get(closed)).toHaveLength(1)
      expect(workersOf(yield* p.ready)).toEqual(["alice"])
    }))

  it.scoped("closing the pool (the daemon stops) recycles every warm box, and none is made after", () =>
    Effect.gen(function*() {
      const fits = yield* Ref.make(true)
      const { closed, p } = yield* started({}, fits)
      yield* p.refill("alice", ONE_SHOT)
      yield* p.refill("bob", ONE_SHOT)
      yield* settle
      expect([...(workersOf(yield* p.ready))].sort()).toEqual(["alice", "bob"])
      yield* p.close
      expect(yield* Ref.get(closed)).toHaveLength(2)
      yield* p.refill("carol", ONE_SHOT)
      yield* settle
      expect(workersOf(yield* p.ready)).toEqual([])
      expect(yield* Ref.get(closed)).toHaveLength(2)
    }))

  it.scoped("closing the pool finishes a box still being made before it returns (its making cut, its box removed): the daemon removes the network next", () =>
    Effect.gen(function*() {
      const making = yield* Deferred.make<void>()
      const removed = yield* Ref.make<ReadonlyArray<string>>([])
      const layer = WarmPool.layerTest({
        // A making that the engine has not finished: cut, it removes what it made (as prepareWarm's scope does).
        prepare: (worker) =>
          Deferred.succeed(making, undefined).pipe(
            Effect.zipRight(Effect.never),
            Effect.onInterrupt(() => Ref.update(removed, (r) => [...r, worker])),
            Effect.as(Option.none<WarmBox>())
          ),
        fits: () => Effect.succeedNone
      }).pipe(Layer.provide(orgOf(yield* Ref.make<BoxKeys>({}))))
      const p = Context.get(yield* Layer.build(layer), WarmPool)
      yield* p.refill("alice", ONE_SHOT)
      yield* Deferred.await(making)
      yield* p.close
      expect(yield* Ref.get(removed)).toEqual(["alice"])
    }))
})
