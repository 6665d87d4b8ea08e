import { Effect } from "effect"
import { textOf } from "../box/transcript.js"

const dim = (s: string) => (process.stdout.isTTY ? `\x1b[2m${s}\x1b[0m` : s)
const short = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s)

/**
 * What a person watching `roster worker run` sees while the box works: the worker's words,
 * each tool it calls and the start of what the tool gave back. Everything else stays in
 * stdout.jsonl.
 */
export const liveLine = (worker: string) => (line: string) =>
  Effect.sync(() => {
    let e: Record<string, unknown>
    try {
      e = JSON.parse(line) as Record<string, unknown>
    } catch {
      return
    }
    if (typeof e !== "object" || e === null) return
    if (e.type === "message_end") {
      const m = (e.message ?? {}) as { role?: string; content?: unknown; stopReason?: string; errorMessage?: string }
      if (m.role !== "assistant") return
      const text = textOf(m.content).trim()
      if (text !== "") process.stdout.write(`${worker}: ${text}\n`)
      if (m.stopReason === "error") process.stdout.write(dim(`${worker}: (model error: ${m.errorMessage ?? "unknown"})\n`))
    } else if (e.type === "tool_execution_start") {
      process.stdout.write(dim(`  -> ${String(e.toolName)} ${short(JSON.stringify(e.args ?? {}), 160)}\n`))
    } else if (e.type === "tool_execution_end") {
      const lines = textOf((e.result as { content?: unknown } | undefined)?.content).split("\n").filter((l) => l.trim() !== "")
      for (const l of lines.slice(0, 3)) process.stdout.write(dim(`     | ${short(l, 160)}\n`))
      if (lines.length > 3) process.stdout.write(dim(`     | … ${lines.length - 3} more lines\n`))
    }
  })
