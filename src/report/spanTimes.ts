import { FileSystem } from "@effect/platform"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { Effect, Layer, Option, Tracer } from "effect"

/** One finished step: its name, its parent's, when it started (ms since the process began) and how long it took. */
export interface SpanTime {
  readonly name: string
  readonly parent: string | null
  readonly startMs: number
  readonly ms: number
}

/** Effect stamps spans in wall-clock nanoseconds; the table reads better from the process start. */
const sinceStart = (ns: bigint) => Number(ns) / 1e6 - performance.timeOrigin

/**
 * A tracer that keeps how long each named step (`Effect.fn`, `withSpan`) took, in `times` as
 * each one ends. For finding where a command's time goes (`ROSTER_TRACE=<file>`), not for
 * production tracing: nothing is sent anywhere, and nothing is kept unless asked for.
 */
export const spanTimesTracer = (times: Array<SpanTime>): Tracer.Tracer => {
  let ids = 0
  return Tracer.make({
    span: (name, parent, context, links, startTime, kind) => {
      const spanId = `s${++ids}`
      const attributes = new Map<string, unknown>()
      const span: Tracer.Span = {
        _tag: "Span",
        name,
        spanId,
        traceId: Option.isSome(parent) ? parent.value.traceId : spanId,
        parent,
        context,
        status: { _tag: "Started", startTime },
        attributes,
        links,
        sampled: true,
        kind,
        end: (endTime) => {
          times.push({
            name,
            parent: Option.isSome(parent) && parent.value._tag === "Span" ? parent.value.name : null,
            startMs: sinceStart(startTime),
            ms: Number(endTime - startTime) / 1e6
          })
        },
        attribute: (key, value) => void attributes.set(key, value),
        event: () => undefined,
        addLinks: () => undefined
      }
      return span
    },
    context: (f) => f()
  })
}

/** Writes each step as a JSON line to `file` when the program it is provided to ends (however the command ended). */
export const layerSpanTimes = (file: string): Layer.Layer<never> => {
  const times: Array<SpanTime> = []
  const written = Layer.scopedDiscard(Effect.flatMap(FileSystem.FileSystem, (fs) =>
    // ROSTER_TRACE's file is a diagnostic: one that cannot be written must not change how the command ended.
    Effect.addFinalizer(() => fs.writeFileString(file, times.map((t) => JSON.stringify(t)).join("\n") + "\n").pipe(Effect.ignore))))
  return Layer.merge(Layer.setTracer(spanTimesTracer(times)), written.pipe(Layer.provide(NodeFileSystem.layer)))
}
