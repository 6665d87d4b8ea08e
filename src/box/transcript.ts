/** What a pi json/rpc transcript says, read line by line; a malformed line is skipped, never fatal. */
export interface TranscriptSummary {
  readonly assistantTexts: ReadonlyArray<string>
  readonly finalText: string | null
  readonly stopReason: string | null
  readonly errorMessage: string | null
  readonly toolCalls: ReadonlyArray<{ readonly name: string; readonly args: unknown }>
  readonly toolResults: ReadonlyArray<{ readonly name: string; readonly output: string; readonly isError: boolean }>
}

interface Part {
  readonly type?: string
  readonly text?: string
}

/** The text parts of a pi message's content (a plain string counts as one). */
export const textOf = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
    ? (content as ReadonlyArray<Part>).filter((p) => p.type === "text" && typeof p.text === "string").map((p) => p.text).join("")
    : ""

/** The JSON object lines of a transcript; anything else (a torn line, pi's noise) is skipped. */
const eventsOf = (jsonl: string): Array<Record<string, unknown>> =>
  jsonl.split("\n").flatMap((line) => {
    if (!line.startsWith("{")) return []
    try {
      return [JSON.parse(line) as Record<string, unknown>]
    } catch {
      return []
    }
  })

export const summarize = (jsonl: string): TranscriptSummary => {
  const assistantTexts: Array<string> = []
  const toolCalls: Array<{ name: string; args: unknown }> = []
  const toolResults: Array<{ name: string; output: string; isError: boolean }> = []
  let stopReason: string | null = null
  let errorMessage: string | null = null
  for (const event of eventsOf(jsonl)) {
    if (event.type === "message_end") {
      const message = (event.message ?? {}) as Record<string, unknown>
      if (message.role !== "assistant") continue
      const text = textOf(message.content).trim()
      if (text !== "") assistantTexts.push(text)
      stopReason = typeof message.stopReason === "string" ? message.stopReason : stopReason
      errorMessage = typeof message.errorMessage === "string" ? message.errorMessage : message.stopReason === "error" ? errorMessage : null
    } else if (event.type === "tool_execution_start") {
      toolCalls.push({ name: String(event.toolName ?? "?"), args: event.args })
    } else if (event.type === "tool_execution_end") {
      const result = (event.result ?? {}) as Record<string, unknown>
      toolResults.push({ name: String(event.toolName ?? "?"), output: textOf(result.content), isError: event.isError === true })
    }
  }
  return {
    assistantTexts,
    finalText: assistantTexts.at(-1) ?? null,
    stopReason,
    errorMessage: stopReason === "error" ? errorMessage ?? "the model call failed" : null,
    toolCalls,
    toolResults
  }
}

/** A session's turns, from its rpc transcript: each prompt pi accepted, and the replies until the next. */
export const turnsOf = (jsonl: string): ReadonlyArray<{ readonly replies: ReadonlyArray<string> }> => {
  const turns: Array<{ replies: Array<string> }> = []
  for (const e of eventsOf(jsonl)) {
    if (e.type === "response" && e.command === "prompt" && e.success !== false) turns.push({ replies: [] })
    else if (e.type === "message_end" && turns.length > 0) {
      const m = (e.message ?? {}) as Record<string, unknown>
      const text = m.role === "assistant" ? textOf(m.content).trim() : ""
      if (text !== "") turns.at(-1)?.replies.push(text)
    }
  }
  return turns
}
