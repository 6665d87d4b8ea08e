import { Context, Effect, Layer, Schema } from "effect"
import type { RunEvent } from "./events.js"

/** A person's or the gateway's decision about a run: the events every node must see alike. */
export type TaintEvent = Extract<RunEvent, { readonly kind: "taint" | "untaint" }>

export const isTaintEvent = (e: RunEvent): e is TaintEvent => e.kind === "taint" || e.kind === "untaint"

/** The taint log did not answer: what a run's taints are is not known. */
export class TaintLogError extends Schema.TaggedError<TaintLogError>()("TaintLogError", {
  detail: Schema.String
}) {
  override get message() {
    return `the fleet's taint log did not answer (${this.detail}): check the database with roster doctor, then try again`
  }
}

/**
 * Taints and untaints of runs where every node of a fleet sees them: a table of the fleet's
 * database (concurrent appends to one file over NFS can interleave or lose lines). A machine on
 * its own keeps them in the run's events file, and has none here.
 */
export class TaintLog extends Context.Tag("roster/TaintLog")<TaintLog, {
  /** Records one taint or untaint of a run, said by `node`. */
  readonly put: (runId: string, node: string, event: TaintEvent) => Effect.Effect<void, TaintLogError>
  /** The runs' taints and untaints in the order they were put (a run with none is absent). */
  readonly of: (runIds: ReadonlyArray<string>) => Effect.Effect<ReadonlyMap<string, ReadonlyArray<TaintEvent>>, TaintLogError>
}>() {
  /** A machine on its own: the run folders hold every taint. */
  static readonly layerNone = Layer.succeed(TaintLog, {
    put: () => Effect.fail(new TaintLogError({ detail: "this machine is not in a fleet" })),
    of: () => Effect.succeed(new Map())
  })

  /** In memory, for unit tests: `down` makes it not answer. */
  static readonly layerTest = (down: { value: boolean } = { value: false }) =>
    Layer.sync(TaintLog, () => {
      const rows: Array<{ readonly runId: string; readonly node: string; readonly event: TaintEvent }> = []
      const answer = <A>(f: () => A) => down.value ? Effect.fail(new TaintLogError({ detail: "down (test)" })) : Effect.sync(f)
      return {
        put: (runId, node, event) => answer(() => void rows.push({ runId, node, event })),
        of: (runIds) =>
          answer(() => {
            const out = new Map<string, Array<TaintEvent>>()
            for (const r of rows) if (runIds.includes(r.runId)) out.set(r.runId, [...(out.get(r.runId) ?? []), r.event])
            return out
          })
      }
    })
}
