import { type Report, reportLine } from "./Reporter.js"
import { visible } from "./terminal.js"

/** Where a report is drawn: a terminal (progress rewritten in place on one line) or not (whole lines only). */
export interface ReportStream {
  readonly isTTY?: boolean
  readonly columns?: number
  readonly write: (s: string) => unknown
}

/**
 * roster's reports on the person's terminal (stderr, so stdout stays what a script reads): steps,
 * build output and notes as lines; progress as one line rewritten in place, and only on a TTY (a
 * pipe or a log gets no half-lines).
 */
export const renderReport = (r: Report, stream: ReportStream) => {
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
