import { type Effect } from "effect"
import { readEvent } from "../contract/piEvents.js"
import { dim, visible } from "../report/terminal.js"

const short = (s: string, n: number) => visible(s.length > n ? `${s.slice(0, n - 1)}…` : s)

/**
 * What a person watching `roster worker run` sees while the box works: the worker's words,
 * each tool it calls and the start of what the tool gave back. Everything else stays in
 * stdout.jsonl. `say` writes to the person's stdout (this process's, or a daemon's stream to the
 * CLI that handed it the run), `colour` whether that stdout takes colour.
 */
export const liveLine = (worker: string, say: (text: string) => Effect.Effect<void>, colour: boolean) => (line: string): Effect.Effect<void> => {
  const faint = (s: string) => dim(s, colour)
  const e = readEvent(line)
  const out: Array<string> = []
  if (e.kind === "assistant") {
    const text = e.text.trim()
    if (text !== "") out.push(`${worker}: ${visible(text)}\n`)
    if (e.stopReason === "error") out.push(faint(`${worker}: (model error: ${visible(e.errorMessage ?? "unknown")})\n`))
  } else if (e.kind === "tool-start") {
    out.push(faint(`  -> ${visible(e.name)} ${short(JSON.stringify(e.args ?? {}), 160)}\n`))
  } else if (e.kind === "cut") {
    out.push(faint(`  [roster: a line of output over ${e.max} bytes was cut here — all of it is in stdout.jsonl]\n`))
  } else if (e.kind === "tool-end") {
    const lines = e.output.split("\n").filter((l) => l.trim() !== "")
    for (const l of lines.slice(0, 3)) out.push(faint(`     | ${short(l, 160)}\n`))
    if (lines.length > 3) out.push(faint(`     | … ${lines.length - 3} more lines\n`))
  }
  return say(out.join(""))
}
