import { Context, Effect, Layer, Schema } from "effect"

/** A run whose work may or may not still land: its id, and its task's when it is one. */
export interface FencedRun {
  readonly runId: string
  readonly taskId: string | null
}

/**
 * A run that may no longer land anything: in a fleet, the node that ran it was declared lost
 * (its attempts fenced, its tasks given to another node), or the fleet's database could not
 * say otherwise.
 */
export class Fenced extends Schema.TaggedError<Fenced>()("Fenced", {
  runId: Schema.String,
  detail: Schema.String
}) {
  override get message() {
    return `run ${this.runId} may not land anything: ${this.detail}`
  }
}

/**
 * Whether a run may still land its work (knowledge_push, set_tasks, memory writes, a reply's
 * delivery). One machine on its own never fences a run. A fleet's node lands a run's work only
 * while the fleet holds that run as this node's current attempt, and holds that fact for as long
 * as the work takes: a lost node's attempt cannot land after the fleet has moved on.
 */
export class RunFence extends Context.Tag("roster/RunFence")<RunFence, {
  /** Runs `land` while `run` may land work; fails with {@link Fenced} when it may not. */
  readonly guard: <A, E, R>(run: FencedRun, land: Effect.Effect<A, E, R>) => Effect.Effect<A, E | Fenced, R>
  /**
   * Why no run of this node may act at all now (its node cut off from the fleet's database, so
   * the fleet may soon re-run its tasks elsewhere), or null. Read on every request a box makes.
   */
  readonly standsDown: Effect.Effect<string | null>
}>() {
  /** One machine: every run lands what it does. */
  static readonly layerNone = Layer.succeed(RunFence, { guard: (_run, land) => land, standsDown: Effect.succeed(null) })
}
