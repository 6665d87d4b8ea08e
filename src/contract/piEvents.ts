import { Option, Schema } from "effect"

// The one reader of pi's json/rpc event lines (pi 1.6; PI.md). Only the fields roster acts on
// are declared; anything else on a line is ignored, and a line that is not one of these events
// is "other" — never a crash, whatever a box prints.

const Part = Schema.Struct({ type: Schema.String, text: Schema.optional(Schema.String) })
// pi always sends content as parts; a bare string is not a message roster relays.
const Content = Schema.Array(Part)

const Message = Schema.Struct({
  role: Schema.String,
  content: Schema.optional(Content),
  stopReason: Schema.optional(Schema.String),
  errorMessage: Schema.optional(Schema.String)
})

const MessageEnd = Schema.Struct({ type: Schema.Literal("message_end"), message: Message })
const AgentStart = Schema.Struct({ type: Schema.Literal("agent_start") })
const AgentEnd = Schema.Struct({ type: Schema.Literal("agent_end"), willRetry: Schema.optional(Schema.Boolean) })
const AgentSettled = Schema.Struct({ type: Schema.Literal("agent_settled") })
const ToolStart = Schema.Struct({ type: Schema.Literal("tool_execution_start"), toolName: Schema.String, args: Schema.optional(Schema.Unknown) })
const ToolEnd = Schema.Struct({
  type: Schema.Literal("tool_execution_end"),
  toolName: Schema.String,
  result: Schema.optional(Schema.Struct({ content: Schema.optional(Content) })),
  isError: Schema.optional(Schema.Boolean)
})
const Response = Schema.Struct({
  type: Schema.Literal("response"),
  command: Schema.String,
  success: Schema.Boolean,
  error: Schema.optional(Schema.String)
})

export const PiEventSchema = Schema.Union(MessageEnd, AgentStart, AgentEnd, AgentSettled, ToolStart, ToolEnd, Response)
export type RawPiEvent = typeof PiEventSchema.Type

/** What roster reads from one line of pi's output. */
export type PiEvent =
  | { readonly kind: "assistant"; readonly text: string; readonly stopReason: string | null; readonly errorMessage: string | null }
  | { readonly kind: "agent-start" }
  /** End of a turn: agent_end with willRetry false (a retried 529 ends one low-level run, not the turn). */
  | { readonly kind: "turn-end" }
  | { readonly kind: "settled" }
  | { readonly kind: "tool-start"; readonly name: string; readonly args: unknown }
  | { readonly kind: "tool-end"; readonly name: string; readonly output: string; readonly isError: boolean }
  | { readonly kind: "prompt-accepted" }
  | { readonly kind: "prompt-refused"; readonly error: string }
  /** A line over the line cap, cut (not an assistant message: that one reads as an assistant event saying so). */
  | { readonly kind: "cut"; readonly max: number }
  | { readonly kind: "other" }

/** The text parts of a pi message's content. */
export const textOf = (content: typeof Content.Type | undefined): string =>
  content === undefined ? "" : content.filter((p) => p.type === "text" && p.text !== undefined).map((p) => p.text).join("")

const decode = Schema.decodeUnknownOption(Schema.parseJson(PiEventSchema))

const OTHER: PiEvent = { kind: "other" }

const CUT = /…\[roster: line cut at (\d+) bytes\]$/

/** What the person reads where a message was too long to hold: it is not lost, only not shown. */
export const cutNotice = (max: number) =>
  `[roster: this message was over ${max} bytes and was cut here — the whole of it is in the run's stdout.jsonl]`

/** A cut line can no longer be parsed; its head still says what it was. */
const readCut = (line: string, max: number): PiEvent => {
  const head = line.slice(0, 300)
  return head.startsWith(`{"type":"message_end"`) && head.includes(`"role":"assistant"`)
    ? { kind: "assistant", text: cutNotice(max), stopReason: null, errorMessage: null }
    : { kind: "cut", max }
}

const KNOWN = new Set(["message_end", "agent_start", "agent_end", "agent_settled", "tool_execution_start", "tool_execution_end", "response"])
const TYPE_FIRST = `{"type":"`

/**
 * The event's type without parsing the line, when pi put it first (it does): a box printing
 * millions of lines of other events costs a string compare each, not a JSON parse and its garbage.
 */
const typeAhead = (line: string): string | undefined => {
  if (!line.startsWith(TYPE_FIRST)) return undefined
  const end = line.indexOf(`"`, TYPE_FIRST.length)
  return end === -1 ? undefined : line.slice(TYPE_FIRST.length, end)
}

/**
 * Whether a line can be an event roster reads (or the preflight's, or a cut line): a reader that
 * wants only those skips the rest without handing each one on.
 */
export const worthReading = (line: string): boolean => {
  const type = typeAhead(line)
  return type === undefined || KNOWN.has(type) || type === "roster_preflight" || line.endsWith("bytes]")
}

export const readEvent = (line: string): PiEvent => {
  // Cheap refusal of what cannot be an event: pi's events are JSON objects, one per line.
  if (!line.startsWith("{")) return OTHER
  const type = typeAhead(line)
  // A cut line goes on to say it was cut, whatever it was.
  if (type !== undefined && !KNOWN.has(type) && !line.endsWith("bytes]")) return OTHER
  const cut = CUT.exec(line.slice(-60))
  if (cut) return readCut(line, Number(cut[1]))
  const decoded = decode(line)
  if (Option.isNone(decoded)) return OTHER
  const e = decoded.value
  switch (e.type) {
    case "message_end":
      // pi also emits system (the appended prompt) and toolResult messages: only the assistant speaks.
      return e.message.role !== "assistant" ? OTHER : {
        kind: "assistant",
        text: textOf(e.message.content),
        stopReason: e.message.stopReason ?? null,
        errorMessage: e.message.errorMessage ?? null
      }
    case "agent_start":
      return { kind: "agent-start" }
    case "agent_end":
      return e.willRetry === true ? OTHER : { kind: "turn-end" }
    case "agent_settled":
      return { kind: "settled" }
    case "tool_execution_start":
      return { kind: "tool-start", name: e.toolName, args: e.args }
    case "tool_execution_end":
      return { kind: "tool-end", name: e.toolName, output: textOf(e.result?.content), isError: e.isError === true }
    case "response":
      if (e.command !== "prompt") return OTHER
      return e.success ? { kind: "prompt-accepted" } : { kind: "prompt-refused", error: e.error ?? "refused" }
  }
}

const SEND_TOOLS = new Set(["discord_send", "slack_send", "term_send", "message_user"])
/** Tools that carry a reply out of the box to a person. */
export const isSendTool = (name: string) => SEND_TOOLS.has(name)

const TextDelta = Schema.parseJson(Schema.Struct({
  type: Schema.Literal("message_update"),
  assistantMessageEvent: Schema.Struct({ type: Schema.Literal("text_delta"), delta: Schema.String })
}))
const decodeTextDelta = Schema.decodeUnknownOption(TextDelta)

/** A reply's text as it streams: the delta of one of pi's message_update events, if the line is one. */
export const readTextDelta = (line: string): string | undefined =>
  line.includes("text_delta") ? Option.getOrUndefined(decodeTextDelta(line))?.assistantMessageEvent.delta : undefined

// What a run's timeline reads of pi's transcript: its turns, each message with its tool calls
// and time, and each tool's output. A line of another shape is skipped, whatever a box printed.
const TimelinePart = Schema.Struct({
  type: Schema.String,
  text: Schema.optional(Schema.String),
  name: Schema.optional(Schema.String),
  arguments: Schema.optional(Schema.Unknown)
})
const TimedMessage = Schema.Struct({
  role: Schema.optional(Schema.String),
  content: Schema.optional(Schema.Union(Schema.Array(TimelinePart), Schema.String)),
  timestamp: Schema.optional(Schema.Number),
  stopReason: Schema.optional(Schema.String),
  errorMessage: Schema.optional(Schema.String)
})
const TimelineLine = Schema.Struct({
  type: Schema.String,
  message: Schema.optional(TimedMessage),
  toolName: Schema.optional(Schema.String),
  result: Schema.optional(Schema.Struct({ content: Schema.optional(Schema.Array(TimelinePart)) })),
  isError: Schema.optional(Schema.Boolean)
})
const decodeTimelineLine = Schema.decodeUnknownOption(Schema.parseJson(TimelineLine))

/** One of pi's events as a run's timeline reads it: the event's time (when pi gave one) and what it shows. */
export type TimelineEvent =
  | { readonly kind: "turn"; readonly timestamp: number | undefined }
  | { readonly kind: "prompt"; readonly timestamp: number | undefined; readonly text: string }
  | {
    readonly kind: "assistant"
    readonly timestamp: number | undefined
    readonly text: string
    readonly calls: ReadonlyArray<{ readonly name: string; readonly args: string }>
    readonly error: string | null
  }
  | { readonly kind: "tool"; readonly timestamp: number | undefined; readonly name: string; readonly output: string; readonly isError: boolean }
  | { readonly kind: "timed"; readonly timestamp: number | undefined }

const partsText = (content: ReadonlyArray<typeof TimelinePart.Type> | string | undefined) =>
  typeof content === "string" ? "" : (content ?? []).filter((p) => p.type === "text").map((p) => p.text ?? "").join("")

/** A line of pi's transcript for the timeline, or none when it is not an event pi writes. */
export const readTimelineEvent = (line: string): TimelineEvent | undefined => {
  if (!line.startsWith("{")) return undefined
  const decoded = decodeTimelineLine(line)
  if (Option.isNone(decoded)) return undefined
  const e = decoded.value
  const m = e.message
  const timestamp = m?.timestamp !== undefined && Number.isFinite(m.timestamp) ? m.timestamp : undefined
  if (e.type === "turn_start") return { kind: "turn", timestamp }
  if (e.type === "message_end" && m?.role === "user") return { kind: "prompt", timestamp, text: partsText(m.content) }
  if (e.type === "message_end" && m?.role === "assistant") {
    const calls = (typeof m.content === "string" ? [] : m.content ?? []).filter((p) => p.type === "toolCall")
      .map((p) => ({ name: p.name ?? "", args: JSON.stringify(p.arguments ?? {}) }))
    return { kind: "assistant", timestamp, text: partsText(m.content), calls, error: m.stopReason === "error" ? m.errorMessage || "error" : null }
  }
  if (e.type === "tool_execution_end") return { kind: "tool", timestamp, name: e.toolName ?? "", output: partsText(e.result?.content), isError: e.isError === true }
  return { kind: "timed", timestamp }
}
