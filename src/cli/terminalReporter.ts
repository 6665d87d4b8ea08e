import { Effect, Layer } from "effect"
import { Reporter } from "../report/Reporter.js"
import { renderReport } from "../report/renderReport.js"

/** Reports drawn on this process's stderr (src/report/renderReport.ts). */
export const TerminalReporter = Layer.succeed(Reporter, {
  report: (r) => Effect.sync(() => renderReport(r, process.stderr))
})
