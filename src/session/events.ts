import { textOf } from "../box/transcript.js"

/** Reading pi's rpc event lines: what the session runner needs to know of each. */
export type PiEvent =
  | { readonly kind: "assistant-text"; readonly text: string }
  | { readonly kind: "turn-end" }
  | { readonly kind: "settled" }
  | { readonly kind: "agent-start" }
  | { readonly kind: "tool-start"; readonly name: string; readonly args: unknown }
  | { readonly kind: "refused"; readonly error: string }
  | { readonly kind: "other" }

const SEND_TOOLS = new Set(["discord_send", "slack_send", "term_send", "message_user"])
export const isSendTool = (name: string) => SEND_TOOLS.has(name)

/** One line of pi's output; a malformed line is "other", never a crash. */
export const readEvent = (line: string): PiEvent => {
  let e: Record<string, unknown>
  try {
    const parsed = JSON.parse(line) as unknown
    if (typeof parsed !== "object" || parsed === null) return { kind: "other" }
    e = parsed as Record<string, unknown>
  } catch {
    return { kind: "other" }
  }
  switch (e.type) {
    case "message_end": {
      const m = (e.message ?? {}) as { role?: unknown; content?: unknown }
      // pi always sends content parts; anything else is not a message to relay.
      if (m.role !== "assistant" || !Array.isArray(m.content)) return { kind: "other" }
      const text = textOf(m.content)
      return text.trim() === "" ? { kind: "other" } : { kind: "assistant-text", text }
    }
    // A retried model error (529) ends one low-level run with willRetry: true; the turn goes on.
    case "agent_end":
      return e.willRetry === true ? { kind: "other" } : { kind: "turn-end" }
    case "agent_settled":
      return { kind: "settled" }
    case "agent_start":
      return { kind: "agent-start" }
    case "tool_execution_start":
      return { kind: "tool-start", name: String(e.toolName ?? ""), args: e.args }
    case "response":
      return e.command === "prompt" && e.success === false ? { kind: "refused", error: String(e.error ?? "refused") } : { kind: "other" }
    default:
      return { kind: "other" }
  }
}
