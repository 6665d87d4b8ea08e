import { describe, expect, it } from "@effect/vitest"
import { readEvent } from "../../src/contract/piEvents.js"
import { initialTurnState, nextMessage, step, type TurnInput, type TurnOutput, type TurnState } from "../../src/session/turns.js"

const msg = (text: string) => ({ text, author: "you", provider: "terminal", messageId: text })
const ev = (v: unknown): TurnInput => ({ _tag: "event", event: readEvent(JSON.stringify(v)) })
const run = (inputs: ReadonlyArray<TurnInput>, surface: "term-session" | "chat-session" = "term-session") =>
  inputs.reduce<[TurnState, Array<TurnOutput>]>(([s, out], i) => {
    const [next, more] = step(s, i, surface)
    return [next, [...out, ...more]]
  }, [initialTurnState, []])

describe("the turn state machine of a warm session (pure)", () => {
  it("queues messages and offers one at a time, in order", () => {
    const [s] = run([{ _tag: "msg", message: msg("one") }, { _tag: "msg", message: msg("two") }])
    expect(nextMessage(s)?.text).toBe("one")
    const [busy] = run([{ _tag: "msg", message: msg("one") }, { _tag: "msg", message: msg("two") }, { _tag: "prompted" }])
    expect(nextMessage(busy)).toBeUndefined()
    expect(busy.turns).toBe(1)
  })

  it("a retried 529 does not end the turn; agent_end without retry does, and its late settle does not end the next", () => {
    const [s, out] = run([
      { _tag: "msg", message: msg("a") }, { _tag: "prompted" }, ev({ type: "agent_start" }),
      ev({ type: "agent_end", willRetry: true }), ev({ type: "agent_start" }),
      ev({ type: "message_end", message: { role: "assistant", content: [{ type: "text", text: "hi" }] } }),
      ev({ type: "agent_end", willRetry: false }),
      { _tag: "msg", message: msg("b") }, { _tag: "prompted" },
      ev({ type: "agent_settled" })
    ])
    expect(out.filter((o) => o._tag === "turn-end")).toEqual([{ _tag: "turn-end", turn: 1, sent: false, failed: false }])
    expect(out).toContainEqual({ _tag: "reply", text: "hi" })
    expect(s.busy).toBe(true)
  })

  it("the inbox closing with nothing in flight ends the session; with a turn in flight it waits for it", () => {
    expect(run([{ _tag: "closed" }])[1]).toContainEqual({ _tag: "end", reason: "closed" })
    const [s, out] = run([{ _tag: "msg", message: msg("a") }, { _tag: "prompted" }, { _tag: "closed" }])
    expect(out.some((o) => o._tag === "end")).toBe(false)
    expect(step(s, ev({ type: "agent_settled" }), "term-session")[1]).toContainEqual({ _tag: "end", reason: "closed" })
  })

  it("abort only while busy; a refused prompt ends the turn with a note; box death ends the session", () => {
    expect(run([{ _tag: "abort" }])[1]).toEqual([])
    expect(run([{ _tag: "msg", message: msg("a") }, { _tag: "prompted" }, { _tag: "abort" }])[1]).toContainEqual({ _tag: "abort" })
    const [, refused] = run([{ _tag: "msg", message: msg("a") }, { _tag: "prompted" }, ev({ type: "response", command: "prompt", success: false, error: "busy" })])
    expect(refused).toContainEqual({ _tag: "note", text: "pi refused the message: busy" })
    expect(run([{ _tag: "died" }])[1]).toEqual([{ _tag: "end", reason: "box-died" }])
  })

  it("on a chat surface text without a send tool is reported undelivered; message_user is relayed", () => {
    const [, out] = run([
      { _tag: "msg", message: msg("a") }, { _tag: "prompted" },
      ev({ type: "message_end", message: { role: "assistant", content: [{ type: "text", text: "lost words" }] } }),
      ev({ type: "agent_settled" })
    ], "chat-session")
    expect(out.some((o) => o._tag === "note" && o.text.includes("not delivered"))).toBe(true)
    const [, sent] = run([
      { _tag: "msg", message: msg("a") }, { _tag: "prompted" },
      ev({ type: "tool_execution_start", toolName: "message_user", args: { text: "for you" } }),
      ev({ type: "tool_execution_end", toolName: "message_user", result: { content: [{ type: "text", text: "delivered" }] }, isError: false }),
      ev({ type: "message_end", message: { role: "assistant", content: [{ type: "text", text: "said it" }] } }),
      ev({ type: "agent_settled" })
    ], "chat-session")
    expect(sent).toContainEqual({ _tag: "message", text: "for you" })
    expect(sent.some((o) => o._tag === "note" || o._tag === "unsent")).toBe(false)
  })

  it("a send counts only once the gateway took it: a failed post leaves the turn's text undelivered", () => {
    for (const name of ["slack_send", "message_user"]) {
      const [, out] = run([
        { _tag: "msg", message: msg("a") }, { _tag: "prompted" },
        ev({ type: "tool_execution_start", toolName: name, args: { text: "the answer" } }),
        ev({ type: "tool_execution_end", toolName: name, result: { content: [{ type: "text", text: "gateway answered 502" }] }, isError: true }),
        ev({ type: "message_end", message: { role: "assistant", content: [{ type: "text", text: "the answer, again" }] } }),
        ev({ type: "agent_settled" })
      ], "chat-session")
      expect(out).toContainEqual({ _tag: "unsent", turn: 1, text: "the answer, again" })
    }
  })

  it("in a talk session term_send is the worker's word to its person, shown at once; the turn's text without it is still the reply", () => {
    const [, out] = run([
      { _tag: "msg", message: msg("a") }, { _tag: "prompted" },
      ev({ type: "tool_execution_start", toolName: "term_send", args: { text: "first, this" } }),
      ev({ type: "message_end", message: { role: "assistant", content: [{ type: "text", text: "and the answer" }] } }),
      ev({ type: "agent_settled" })
    ])
    expect(out).toEqual([{ _tag: "send", text: "first, this" }, { _tag: "reply", text: "and the answer" }, { _tag: "turn-end", turn: 1, sent: false, failed: false }])
  })

  it("a turn's end says whether a send of it was taken and whether pi finished it (a chat message's mark)", () => {
    const turnEnd = (inputs: ReadonlyArray<TurnInput>) => run([{ _tag: "msg", message: msg("a") }, { _tag: "prompted" }, ...inputs], "chat-session")[1].find((o) => o._tag === "turn-end")
    const sendOk = [
      ev({ type: "tool_execution_start", toolName: "slack_send", args: { text: "x" } }),
      ev({ type: "tool_execution_end", toolName: "slack_send", result: { content: [] }, isError: false })
    ]
    expect(turnEnd([...sendOk, ev({ type: "agent_settled" })])).toEqual({ _tag: "turn-end", turn: 1, sent: true, failed: false })
    const erred = ev({ type: "message_end", message: { role: "assistant", content: [], stopReason: "error", errorMessage: "overloaded" } })
    expect(turnEnd([...sendOk, erred, ev({ type: "agent_settled" })])).toEqual({ _tag: "turn-end", turn: 1, sent: true, failed: true })
    expect(turnEnd([ev({ type: "response", command: "prompt", success: false, error: "busy" })])).toEqual({ _tag: "turn-end", turn: 1, sent: false, failed: true })
    // The next turn starts clean.
    const [, out] = run([
      { _tag: "msg", message: msg("a") }, { _tag: "prompted" }, erred, ev({ type: "agent_settled" }),
      { _tag: "msg", message: msg("b") }, { _tag: "prompted" }, ev({ type: "agent_start" }), ev({ type: "agent_settled" })
    ], "chat-session")
    expect(out.filter((o) => o._tag === "turn-end").map((o) => o._tag === "turn-end" && o.failed)).toEqual([true, false])
  })

  it("a skipped message is dropped and the next one offered", () => {
    const [s] = run([{ _tag: "msg", message: msg("bad") }, { _tag: "msg", message: msg("good") }, { _tag: "skipped" }])
    expect(nextMessage(s)?.text).toBe("good")
  })
})
