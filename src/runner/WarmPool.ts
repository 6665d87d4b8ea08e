import { Context, Duration, Effect, Exit, Fiber, Layer, Option, Queue, Ref, Scope } from "effect"
import { OrgConfig } from "../config/OrgConfig.js"
import type { Org } from "../config/schema.js"
import { FleetMember } from "../fleet/FleetMember.js"
import { recentWorkers } from "../box/recentWorkers.js"
import type { PreparedRun, RunLimits } from "../box/prepareRun.js"
import { handOverWarm } from "../box/warmHandOver.js"
import { ONE_SHOT, prepareWarm, sameShape, type TakenWarm, type WarmBox, warmFits, type WarmShape } from "../box/warmBox.js"

/** What making and checking a warm box needs of roster (the engine, the files, the org). */
export type WarmEnv =
  | Effect.Effect.Context<ReturnType<typeof prepareWarm>>
  | Effect.Effect.Context<ReturnType<typeof warmFits>>
  | Effect.Effect.Context<ReturnType<typeof handOverWarm>>

/** org.toml keeps no warm box: `[box] warm = "off"`, or room for none. */
const warmOff = (org: Org) => org.box.warm === "off" || org.box.warm_max === 0

/** A run's own limits, as far as a warm box cares: its own ceiling or idle time makes it another box. */
export type WarmLimits = RunLimits

/**
 * This node's warm boxes: at most one per worker, at most `[box] warm_max` at once, each recycled
 * when idle past `[box] warm_idle_min`, when what it was made from changed (found at its claim),
 * and when the daemon stops. A warm box never serves two runs: a take removes it.
 */
export class WarmPool extends Context.Tag("roster/WarmPool")<WarmPool, {
  /**
   * The worker's warm box when it fits a run of this shape and limits, taken out of the pool (the taker
   * closes its scope), with that run prepared as it was checked and the box handed to it under the run's
   * id (`runId`, or a new one). Not interruptible (a few ms; a box taken as it was made waits for its
   * preflight): the taker takes it in an uninterruptible region too and arms the box's close before it
   * lets go of that.
   */
  readonly take: (worker: string, shape: WarmShape, limits: WarmLimits, runId?: string) => Effect.Effect<Option.Option<TakenWarm>>
  /** A run of the worker ended: its next box, of the shape of that run, is made ready in the background (when warm boxes are on). */
  readonly refill: (worker: string, shape: WarmShape) => Effect.Effect<void>
  /** The warm boxes ready now (no run has taken them), by worker and run id. */
  readonly ready: Effect.Effect<ReadonlyArray<{ readonly worker: string; readonly runId: string }>>
  /** The daemon stops: every warm box is recycled now and none is made after. */
  readonly close: Effect.Effect<void>
}>() {
  /**
   * The pool's part in the daemon's start and stop, placed above the gateway's and the locked network's
   * layers: once the gateway listens (a box's preflight needs it), the workers that ran within `[box]
   * warm_idle_min` get their warm box; and the boxes are gone before the network is removed (a box still
   * attached would keep it).
   */
  static readonly daemonHooks = Layer.scopedDiscard(Effect.gen(function*() {
    const pool = yield* WarmPool
    yield* Effect.addFinalizer(() => pool.close)
    const org = yield* (yield* OrgConfig).snapshot.pipe(Effect.option)
    if (Option.isNone(org) || warmOff(org.value)) return
    // Their next run is taken to be a one-shot (a worker run, a task): the commonest, and a session's box of another shape is recycled at its claim.
    yield* Effect.forEach(yield* recentWorkers(org.value.box.warm_idle_min, org.value.box.warm_max), (w) => pool.refill(w, ONE_SHOT), { discard: true })
  }))

  /** Warm boxes in the daemon's scope: closing it recycles every one left. */
  static readonly layer: Layer.Layer<WarmPool, never, WarmEnv> = Layer.scoped(
    WarmPool,
    Effect.flatMap(Effect.serviceOption(FleetMember), (member) =>
      makePool({
        prepare: prepareWarm,
        fits: warmFits,
        handOver: handOverWarm,
        // A fleet node the fleet fenced, or one cut off from its database, makes none: it must put its boxes down, not raise more.
        paused: Option.match(member, {
          onNone: () => Effect.succeed(false),
          onSome: (m) => Effect.zipWith(m.fenced, m.cutOff, (fenced, cut) => fenced || cut)
        })
      }))
  )

  /** The pool over boxes a test makes (its own `prepare` and `fits`): its timing, room and recycling, without an engine. */
  static readonly layerTest = <R>(ops: PoolOps<R>): Layer.Layer<WarmPool, never, R | OrgConfig> => Layer.scoped(WarmPool, makePool(ops))

  /** No warm boxes (a CLI running its own runs, and tests that do not test them): every run starts its own box. */
  static readonly off: Layer.Layer<WarmPool> = Layer.succeed(WarmPool, {
    take: () => Effect.succeedNone,
    refill: () => Effect.void,
    ready: Effect.succeed([]),
    close: Effect.void
  })
}

/** How the pool makes a warm box and checks one against a run (the box layer's, or a test's). */
export interface PoolOps<R> {
  readonly prepare: (worker: string, shape: WarmShape) => Effect.Effect<Option.Option<WarmBox>, { readonly message: string }, R>
  /** The run the box would serve, prepared under a run id of its own, when it fits one of this shape and limits. */
  readonly fits: (warm: WarmBox, shape: WarmShape, limits: WarmLimits, runId?: string) => Effect.Effect<Option.Option<PreparedRun>, { readonly message: string }, R>
  /** The box given to that run, under its run id (the box layer renames the box and its folders); as it is when absent. */
  readonly handOver?: (warm: WarmBox, run: PreparedRun) => Effect.Effect<TakenWarm, { readonly message: string }, R>
  /** While true, no warm box is made. */
  readonly paused?: Effect.Effect<boolean>
}

function makePool<R>(ops: PoolOps<R>) {
  return Effect.gen(function*() {
    const env = Context.omit(Scope.Scope)(yield* Effect.context<R | OrgConfig>()) as Context.Context<R | OrgConfig>
    const scope = yield* Effect.scope
    const boxes = yield* Ref.make<ReadonlyMap<string, WarmBox>>(new Map())
    const making = yield* Ref.make<ReadonlySet<string>>(new Set())
    const recycle = (warm: WarmBox, why: string) =>
      Effect.logInfo(`warm box ${warm.runId} of ${warm.worker} recycled: ${why}`).pipe(Effect.zipRight(Scope.close(warm.scope, Exit.void)))
    /** Out of the pool, if it is still the one there. */
    const remove = (warm: WarmBox) =>
      Ref.modify(boxes, (m) => {
        if (m.get(warm.worker) !== warm) return [false, m] as const
        const next = new Map(m)
        next.delete(warm.worker)
        return [true, next] as const
      })
    const closed = yield* Ref.make(false)
    // Recyclings the pool's own fiber runs (a take's misfit, an idle box), so that close can finish what is left of them.
    const jobs = yield* Queue.unbounded<Effect.Effect<void>>()
    const turnedOff = Effect.flatMap(OrgConfig, (c) => c.snapshot).pipe(
      Effect.map(warmOff),
      // An org.toml that does not read leaves warm boxes as they are: the runs' own start says what is wrong with it.
      Effect.orElseSucceed(() => false),
      Effect.provide(env)
    )
    /** Taken out, then `then`, as one step: a box out of the pool is always on its way to being closed. */
    const removeThen = (warm: WarmBox, then: Effect.Effect<void>) =>
      Effect.uninterruptible(Effect.flatMap(remove(warm), (was) => (was ? then : Effect.void)))
    const removeAndRecycle = (warm: WarmBox, why: string) => removeThen(warm, recycle(warm, why))
    const idleOut = (warm: WarmBox, idle: Duration.Duration) =>
      Effect.sleep(idle).pipe(Effect.zipRight(removeThen(warm, Queue.offer(jobs, recycle(warm, `no run took it in ${Duration.format(idle)}`)))))

    const make = (worker: string, shape: WarmShape) =>
      Effect.gen(function*() {
        const org = yield* (yield* OrgConfig).snapshot
        if (warmOff(org) || (yield* Ref.get(closed)) || (ops.paused && (yield* ops.paused))) return
        // The worker's box is of its last run's kind: one of another kind gives way.
        const had = (yield* Ref.get(boxes)).get(worker)
        if (had && sameShape(had.shape, shape)) return
        if (had) yield* removeAndRecycle(had, "its worker's last run was of another kind")
        // Room next: the oldest warm box gives its place to the worker that ran last.
        const held = yield* Ref.get(boxes)
        // `making` holds this worker too: the others being made count against the room.
        if (held.size + (yield* Ref.get(making)).size - 1 >= org.box.warm_max) {
          const oldest = [...held.values()].sort((a, b) => a.preparedAt - b.preparedAt)[0]
          if (oldest === undefined) return
          yield* removeAndRecycle(oldest, `room for ${worker}'s ([box] warm_max = ${org.box.warm_max})`)
        }
        // The making may be cut (the daemon stops: its box is removed with it); once made, the box is placed or recycled, never dropped.
        yield* Effect.uninterruptibleMask((restore) =>
          Effect.gen(function*() {
            const made = yield* restore(ops.prepare(worker, shape))
            if (Option.isNone(made)) return
            const warm = made.value
            const stopping = yield* Ref.get(closed)
            const placed = !stopping && (yield* Ref.modify(boxes, (m) => (m.has(worker) ? [false, m] as const : [true, new Map(m).set(worker, warm)] as const)))
            if (!placed) return yield* recycle(warm, stopping ? "the daemon stops" : "another was made first")
            yield* Effect.logInfo(`warm box ${warm.runId} of ${worker} ready`)
            // restore: a fiber forked here would be as uninterruptible as this region, and its sleep would hold the pool's close.
            yield* Effect.forkIn(restore(idleOut(warm, Duration.minutes(org.box.warm_idle_min))), scope)
          }))
      }).pipe(Effect.provide(env))

    // The boxes are made and recycled by the pool's own fiber, never the asking run's: a run's fiber
    // carries its console and logger (a handed-over run's are its CLI's stream), which are not the daemon's.
    const asks = yield* Queue.unbounded<{ readonly worker: string; readonly shape: WarmShape }>()
    const runJob = (job: Effect.Effect<void>) => job.pipe(Effect.catchAllCause((c) => Effect.logError("warm boxes: a recycling failed", c)))
    const recycler = yield* Effect.forkScoped(Effect.forever(Effect.flatMap(Queue.take(jobs), runJob)))
    const makeAsked = ({ shape, worker }: { readonly worker: string; readonly shape: WarmShape }) =>
      make(worker, shape).pipe(
        Effect.catchAll((e) => Effect.logWarning(`warm box of ${worker} could not be made (${e.message}); its next run starts its own box`)),
        Effect.catchAllDefect((d) => Effect.logError(`warm box of ${worker}: unexpected failure`, d)),
        Effect.ensuring(Ref.update(making, (s) => {
          const next = new Set(s)
          next.delete(worker)
          return next
        }))
      )
    const maker = yield* Effect.forkScoped(Effect.forever(Effect.flatMap(Queue.take(asks), makeAsked)))

    // The pool's own fibers are this layer's, which the daemon releases after the network its boxes
    // stand on: so a box being made or recycled when the daemon stops is done with here, before close
    // returns (an interrupted making removes its box), else it would hold the network past its removal.
    const close = Ref.set(closed, true).pipe(
      Effect.zipRight(Fiber.interrupt(maker)),
      Effect.zipRight(Fiber.interrupt(recycler)),
      Effect.zipRight(Queue.takeAll(jobs)),
      Effect.flatMap((left) => Effect.forEach(left, runJob, { discard: true })),
      Effect.zipRight(Ref.getAndSet(boxes, new Map())),
      Effect.flatMap((m) => Effect.forEach(m.values(), (w) => recycle(w, "the daemon stops"), { discard: true }))
    )
    yield* Effect.addFinalizer(() => close)

    return WarmPool.of({
      take: (worker, shape, limits, runId) =>
        Effect.gen(function*() {
          const warm = (yield* Ref.get(boxes)).get(worker)
          if (warm === undefined || !(yield* remove(warm))) return Option.none()
          // Turned off since it was made: no run takes it (the next take of each worker's recycles it).
          if (yield* turnedOff) {
            yield* Queue.offer(jobs, recycle(warm, "[box] warm is off (or warm_max is 0) in org.toml"))
            return Option.none()
          }
          const fits = yield* ops.fits(warm, shape, limits, runId).pipe(Effect.provide(env), Effect.either)
          if (fits._tag === "Right" && Option.isSome(fits.right)) {
            const run = fits.right.value
            const handed = yield* (ops.handOver ? ops.handOver(warm, run) : Effect.succeed<TakenWarm>({ ...warm, run, madeAs: warm.runId, renamed: Effect.void })).pipe(Effect.provide(env), Effect.either)
            if (handed._tag === "Right") return Option.some(handed.right)
            yield* Queue.offer(jobs, recycle(warm, `it could not be handed to run ${run.runId} (${handed.left.message})`))
            return Option.none()
          }
          // Said in the daemon's log (by the pool's fiber), not to the person whose run now starts its own box.
          yield* Queue.offer(jobs, recycle(warm, fits._tag === "Left"
            ? `it could not be checked (${fits.left.message})`
            : "the run would not be made from what it was (its kind, org.toml, the worker's settings, identity or grants, or the run's own limits), or it cannot serve"))
          return Option.none()
          // Whole: a box out of the pool is handed over or recycled, never dropped by a taker stopped halfway.
        }).pipe(Effect.uninterruptible),
      refill: (worker, shape) =>
        Ref.modify(making, (s) => (s.has(worker) ? [false, s] as const : [true, new Set(s).add(worker)] as const)).pipe(
          Effect.flatMap((asked) => (asked ? Queue.offer(asks, { worker, shape }) : Effect.void)),
          Effect.asVoid
        ),
      ready: Effect.map(Ref.get(boxes), (m) => [...m.values()].map((w) => ({ worker: w.worker, runId: w.runId }))),
      close
    })
  })
}
