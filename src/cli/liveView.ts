import { Effect } from "effect"
import { readEvent } from "../contract/piEvents.js"
import { dim, visible } from "./terminal.js"

const short = (s: string, n: number) => visible(s.length > n ? `${s.slice(0, n - 1)}…` : s)

/**
 * What a person watching `roster worker run` sees while the box works: the worker's words,
 * each tool it calls and the start of what the tool gave back. Everything else stays in
 * stdout.jsonl.
 */
export const liveLine = (worker: string) => (line: string) =>
  Effect.sync(() => {
    const e = readEvent(line)
    if (e.kind === "assistant") {
      const text = e.text.trim()
      if (text !== "") process.stdout.write(`${worker}: ${visible(text)}\n`)
      if (e.stopReason === "error") process.stdout.write(dim(`${worker}: (model error: ${visible(e.errorMessage ?? "unknown")})\n`))
    } else if (e.kind === "tool-start") {
      process.stdout.write(dim(`  -> ${visible(e.name)} ${short(JSON.stringify(e.args ?? {}), 160)}\n`))
    } else if (e.kind === "cut") {
      process.stdout.write(dim(`  [roster: a line of output over ${e.max} bytes was cut here — all of it is in stdout.jsonl]\n`))
    } else if (e.kind === "tool-end") {
      const lines = e.output.split("\n").filter((l) => l.trim() !== "")
      for (const l of lines.slice(0, 3)) process.stdout.write(dim(`     | ${short(l, 160)}\n`))
      if (lines.length > 3) process.stdout.write(dim(`     | … ${lines.length - 3} more lines\n`))
    }
  })
