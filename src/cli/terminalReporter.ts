import { Effect, Layer } from "effect"
import { type Report, reportLine, Reporter } from "../report/Reporter.js"
import { visible } from "./terminal.js"

/**
 * roster's reports on the person's terminal (stderr, so stdout stays what a script reads): steps,
 * build output and notes as lines; progress as one line rewritten in place, and only on a TTY (a
 * pipe or a log gets no half-lines).
 */
export const renderReport = (r: Report, stream: { readonly isTTY?: boolean; readonly columns?: number; write: (s: string) => unknown }) => {
  if (r._tag === "Progress") {
    if (stream.isTTY) stream.write(`\r\x1b[K${visible(r.line).slice(0, Math.max(20, (stream.columns ?? 80) - 1))}`)
    return
  }
  if (r._tag === "ProgressDone") {
    if (stream.isTTY) stream.write("\r\x1b[K")
    return
  }
  const line = reportLine(r)
  if (line !== undefined) stream.write(`${visible(line)}\n`)
}

export const TerminalReporter = Layer.succeed(Reporter, {
  report: (r) => Effect.sync(() => renderReport(r, process.stderr))
})
