import { Deferred, Effect, FiberMap, Queue, Ref } from "effect"
import type { Semaphore } from "effect/Effect"

/** A task whose box this daemon runs. */
export interface LiveTask {
  readonly taskId: string
  readonly worker: string
  readonly runId: string
  /** Completing it cancels the run: the box is killed and the run ends "cancelled". */
  readonly stop: Deferred.Deferred<void>
}

/** A box this daemon took over from an owner that is gone (adopting or reaping it). */
export interface HeldBox {
  readonly containerId: string
  readonly runId: string
  readonly worker: string
  readonly taskId: string | null
  readonly how: "adopt" | "reap"
}

/** What the supervisor knows in memory; the task records on disk stay the truth. */
export interface SupervisorState {
  readonly live: Ref.Ref<ReadonlyMap<string, LiveTask>>
  readonly runs: FiberMap.FiberMap<string>
  readonly held: Ref.Ref<ReadonlyMap<string, HeldBox>>
  readonly takeovers: FiberMap.FiberMap<string>
  readonly cancelRequested: Ref.Ref<ReadonlySet<string>>
  readonly counts: Ref.Ref<{ readonly adopted: number; readonly reaped: number }>
  /** Wakes the dispatch loop at once (a task added, cancelled or ended) instead of at its next tick. */
  readonly wake: Queue.Queue<void>
  readonly startedAt: number
  /** Runs whose record the reaper has seen finished (it never reads them again). */
  readonly settled: Set<string>
  /**
   * Boxes of this daemon that are not tasks', by key: a chat session's counts toward concurrency and
   * one box per worker; a person's handed-over run only toward one box per worker (`counts` false).
   */
  readonly sessions: Ref.Ref<ReadonlyMap<string, OtherBox>>
  /** Taken by a dispatch pass and by a session taking a slot, so the two never both take the last one. */
  readonly slots: Semaphore
}

/** A box of this daemon that is not a task's: its worker, and whether it takes a `[supervisor] concurrency` slot. */
export interface OtherBox {
  readonly worker: string
  readonly counts: boolean
}

export const makeState = (startedAt: number) =>
  Effect.gen(function*() {
    return {
      live: yield* Ref.make<ReadonlyMap<string, LiveTask>>(new Map()),
      runs: yield* FiberMap.make<string>(),
      held: yield* Ref.make<ReadonlyMap<string, HeldBox>>(new Map()),
      takeovers: yield* FiberMap.make<string>(),
      cancelRequested: yield* Ref.make<ReadonlySet<string>>(new Set()),
      counts: yield* Ref.make({ adopted: 0, reaped: 0 }),
      wake: yield* Queue.sliding<void>(1),
      startedAt,
      settled: new Set<string>(),
      sessions: yield* Ref.make<ReadonlyMap<string, OtherBox>>(new Map()),
      slots: yield* Effect.makeSemaphore(1)
    } satisfies SupervisorState
  })

export const withKey = <V>(m: ReadonlyMap<string, V>, k: string, v: V): ReadonlyMap<string, V> => new Map(m).set(k, v)
export const withoutKey = <V>(m: ReadonlyMap<string, V>, k: string): ReadonlyMap<string, V> => {
  const next = new Map(m)
  next.delete(k)
  return next
}
