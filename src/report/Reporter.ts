import { Context, Effect, FiberSet, Layer, Ref } from "effect"

/**
 * What roster has to say while it works, as data: the CLI renders it on a terminal, an embedder
 * gets it as events (or as log lines by default). Library code never writes to a terminal.
 */
export type Report =
  /** A step of a long job ("3/5 the engine …"). */
  | { readonly _tag: "Step"; readonly task: string; readonly text: string }
  /** A line of a job's own output (an image build's log): worth keeping, shown indented. */
  | { readonly _tag: "Output"; readonly task: string; readonly line: string }
  /** The latest state of something in progress (a layer being pulled): only the newest matters. */
  | { readonly _tag: "Progress"; readonly task: string; readonly line: string }
  /** The progress of `task` is over: a renderer clears its line. */
  | { readonly _tag: "ProgressDone"; readonly task: string }
  /** Something the person should know: a note, or a warning. */
  | { readonly _tag: "Notice"; readonly level: "info" | "warning"; readonly text: string }

export const step = (task: string, text: string): Report => ({ _tag: "Step", task, text })
export const output = (task: string, line: string): Report => ({ _tag: "Output", task, line })
export const progress = (task: string, line: string): Report => ({ _tag: "Progress", task, line })
export const progressDone = (task: string): Report => ({ _tag: "ProgressDone", task })
export const notice = (text: string, level: "info" | "warning" = "info"): Report => ({ _tag: "Notice", level, text })

/** A report as one plain line (what a log or a non-terminal shows); undefined for what only a live terminal shows. */
export const reportLine = (r: Report): string | undefined => {
  switch (r._tag) {
    case "Step":
      return r.text
    case "Output":
      return `    ${r.line}`
    case "Notice":
      return r.level === "warning" ? `note: ${r.text}` : r.text
    case "Progress":
    case "ProgressDone":
      return undefined
  }
}

/** The reports `Reporter.layerCollect` kept, in order. */
export class ReportLog extends Context.Tag("roster/ReportLog")<ReportLog, Ref.Ref<ReadonlyArray<Report>>>() {}

/** Where roster's progress, notes and warnings go. Read per call: providing another replaces it everywhere. */
export class Reporter extends Context.Tag("roster/Reporter")<Reporter, {
  readonly report: (r: Report) => Effect.Effect<void>
}>() {
  /** The library's default: each report a log line at its level (progress at debug), nothing on a terminal. */
  static readonly layerLog = Layer.succeed(Reporter, {
    report: (r) => {
      const line = reportLine(r)
      if (r._tag === "Progress") return Effect.logDebug(`${r.task}: ${r.line}`)
      if (line === undefined) return Effect.void
      return r._tag === "Notice" && r.level === "warning" ? Effect.logWarning(r.text) : Effect.logInfo(line.trim())
    }
  })

  /** Keeps every report in order, for a test (or an embedder) to read from ReportLog. */
  static readonly layerCollect = Layer.effectContext(Effect.gen(function*() {
    const log = yield* Ref.make<ReadonlyArray<Report>>([])
    return Context.make(Reporter, { report: (r) => Ref.update(log, (l) => [...l, r]) }).pipe(Context.add(ReportLog, log))
  }))
}

/**
 * A plain function that reports, for a callback outside Effect (a process's output, an engine's
 * progress): it reaches the caller's Reporter, each report a fiber of the caller's scope.
 */
export const reporterCallback = Effect.gen(function*() {
  const reporter = yield* Reporter
  const run = yield* FiberSet.makeRuntime<never>()
  return (r: Report): void => void run(reporter.report(r))
})

/** Reports through whatever Reporter the caller's context holds. */
export const report = (r: Report) => Effect.flatMap(Reporter, (rep) => rep.report(r))
