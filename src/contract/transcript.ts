import { type PiEvent, readEvent } from "./piEvents.js"

/** What a pi transcript says, folded event by event (so a run never reads its transcript whole). */
export interface TranscriptSummary {
  readonly assistantTexts: ReadonlyArray<string>
  readonly finalText: string | null
  readonly stopReason: string | null
  readonly errorMessage: string | null
  readonly toolCalls: ReadonlyArray<{ readonly name: string; readonly args: unknown }>
  readonly toolResults: ReadonlyArray<{ readonly name: string; readonly output: string; readonly isError: boolean }>
}

export const emptySummary: TranscriptSummary = {
  assistantTexts: [], finalText: null, stopReason: null, errorMessage: null, toolCalls: [], toolResults: []
}

/** One event into the summary. A failed model call is the last assistant message's stopReason "error". */
export const summaryStep = (s: TranscriptSummary, e: PiEvent): TranscriptSummary => {
  switch (e.kind) {
    case "assistant": {
      const text = e.text.trim()
      const assistantTexts = text === "" ? s.assistantTexts : [...s.assistantTexts, text]
      const stopReason = e.stopReason ?? s.stopReason
      const errorMessage = stopReason === "error" ? e.errorMessage ?? s.errorMessage ?? "the model call failed" : null
      return { ...s, assistantTexts, finalText: assistantTexts.at(-1) ?? null, stopReason, errorMessage }
    }
    case "tool-start":
      return { ...s, toolCalls: [...s.toolCalls, { name: e.name, args: e.args }] }
    case "tool-end":
      return { ...s, toolResults: [...s.toolResults, { name: e.name, output: e.output, isError: e.isError }] }
    default:
      return s
  }
}

export const summarize = (jsonl: string): TranscriptSummary =>
  jsonl.split("\n").map(readEvent).reduce(summaryStep, emptySummary)

export type Turns = ReadonlyArray<{ readonly replies: ReadonlyArray<string> }>

/** One line of a session's rpc transcript folded into its turns (for reading a transcript line by line). */
export const turnsStep = (turns: Turns, line: string): Turns => {
  const e = readEvent(line)
  if (e.kind === "prompt-accepted") return [...turns, { replies: [] }]
  if (e.kind !== "assistant" || turns.length === 0 || e.text.trim() === "") return turns
  const last = turns.at(-1)
  return [...turns.slice(0, -1), { replies: [...(last?.replies ?? []), e.text.trim()] }]
}

/** A session's turns, from its rpc transcript: each prompt pi accepted, and the replies until the next. */
export const turnsOf = (jsonl: string): Turns => jsonl.split("\n").reduce(turnsStep, [] as Turns)

/** One line folded into a run's summary. */
export const summaryLine = (s: TranscriptSummary, line: string) => summaryStep(s, readEvent(line))
