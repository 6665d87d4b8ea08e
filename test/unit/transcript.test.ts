import { describe, expect, it } from "@effect/vitest"
import { summarize, turnsOf } from "../../src/contract/transcript.js"

const l = (v: unknown) => JSON.stringify(v)

describe("reading pi's transcript", () => {
  it("finds the final assistant text, the stop reason, tool calls, and a failed model call", () => {
    const ok = summarize([
      l({ type: "session" }), "torn{", l({ type: "message_end", message: { role: "system", content: [{ type: "text", text: "sys" }] } }),
      l({ type: "tool_execution_start", toolName: "bash", args: { command: "ls" } }),
      l({ type: "tool_execution_end", toolName: "bash", result: { content: [{ type: "text", text: "a\nb" }] }, isError: false }),
      l({ type: "message_end", message: { role: "assistant", content: [{ type: "text", text: "done" }], stopReason: "stop" } })
    ].join("\n"))
    expect(ok).toMatchObject({ finalText: "done", stopReason: "stop", errorMessage: null, toolCalls: [{ name: "bash", args: { command: "ls" } }] })
    expect(ok.toolResults[0]?.output).toBe("a\nb")
    const failed = summarize(l({ type: "message_end", message: { role: "assistant", content: [], stopReason: "error", errorMessage: "529 overloaded" } }))
    expect(failed).toMatchObject({ stopReason: "error", errorMessage: "529 overloaded", finalText: null })
  })

  it("splits a session into turns at each accepted prompt", () => {
    const turns = turnsOf([
      l({ type: "response", command: "prompt", success: true }),
      l({ type: "message_end", message: { role: "assistant", content: [{ type: "text", text: "one" }] } }),
      l({ type: "response", command: "prompt", success: false }),
      l({ type: "response", command: "prompt", success: true }),
      l({ type: "message_end", message: { role: "assistant", content: [{ type: "text", text: "two" }] } })
    ].join("\n"))
    expect(turns).toEqual([{ replies: ["one"] }, { replies: ["two"] }])
  })
})

describe("a session turn's input", () => {
  it("carries the message's provenance, and the room's history on the first turn only", async () => {
    const { Effect } = await import("effect")
    const { compileTurn } = await import("../../src/session/turnContext.js")
    const { Files } = await import("../../src/fs/Files.js")
    const fs = await import("node:fs")
    const os = await import("node:os")
    const path = await import("node:path")
    const trace = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "roster-turn-")), "turns.jsonl")
    const message = { text: "deploy?", author: "sam", provider: "discord", messageId: "m7", history: [{ author: "kim", text: "tests are green" }] }
    const first = await Effect.runPromise(compileTurn(message, 1, trace).pipe(Effect.provide(Files.layer)))
    const second = await Effect.runPromise(compileTurn(message, 2, trace).pipe(Effect.provide(Files.layer)))
    expect(first).toContain("kim: tests are green")
    expect(first).toContain("[discord message m7 from sam]\ndeploy?")
    expect(second).not.toContain("tests are green")
    expect(fs.readFileSync(trace, "utf8").trim().split("\n")).toHaveLength(2)
  })
})
