import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import { layout } from "../../src/config/Paths.js"
import { readTimelineEvent } from "../../src/contract/piEvents.js"
import { RunLog } from "../../src/run/RunLog.js"
import { timelineOf } from "../../src/web/timeline.js"
import { tempPaths, unitLayer, writeFixture } from "../support/harness.js"

const line = (v: unknown) => JSON.stringify(v)

describe("a run's timeline (pi's events through contract/piEvents)", () => {
  it("reads turns, prompts, answers with their tool calls, tool output and errors; anything else is only a time or nothing", () => {
    expect(readTimelineEvent(line({ type: "turn_start" }))).toEqual({ kind: "turn", timestamp: undefined })
    expect(readTimelineEvent(line({ type: "message_end", message: { role: "user", content: [{ type: "text", text: "hi" }], timestamp: 5 } })))
      .toEqual({ kind: "prompt", timestamp: 5, text: "hi" })
    expect(readTimelineEvent(line({
      type: "message_end",
      message: { role: "assistant", content: [{ type: "text", text: "a" }, { type: "toolCall", name: "bash", arguments: { cmd: "ls" } }, { type: "text", text: "b" }], stopReason: "error", errorMessage: "529" }
    }))).toEqual({ kind: "assistant", timestamp: undefined, text: "ab", calls: [{ name: "bash", args: `{"cmd":"ls"}` }], error: "529" })
    expect(readTimelineEvent(line({ type: "tool_execution_end", toolName: "bash", result: { content: [{ type: "text", text: "out" }] }, isError: true })))
      .toEqual({ kind: "tool", timestamp: undefined, name: "bash", output: "out", isError: true })
    expect(readTimelineEvent(line({ type: "message_update", message: { role: "assistant", timestamp: 9 } }))).toEqual({ kind: "timed", timestamp: 9 })
    expect(readTimelineEvent("not json")).toBeUndefined()
    expect(readTimelineEvent(`{"type":"message_end","message":"not an object"}`)).toBeUndefined()
  })

  it.effect("interleaves pi's events, the gateway's requests and message_user by time; torn lines are skipped", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const runId = "2026-12-01-10-00-00-0000beef"
    return Effect.gen(function*() {
      const record = yield* (yield* RunLog).start({ runId, worker: "alice", kind: "box" })
      const started = Date.parse(record.started_at)
      const dir = layout(paths).runDir("alice", runId)
      fs.writeFileSync(`${dir}/stdout.jsonl`, [
        line({ type: "turn_start" }),
        line({ type: "message_end", message: { role: "user", content: [{ type: "text", text: "do it" }], timestamp: started + 1000 } }),
        "garbage {",
        line({ type: "message_end", message: { role: "assistant", content: [{ type: "text", text: "done" }], timestamp: started + 3000 } })
      ].join("\n"))
      fs.writeFileSync(`${dir}/messages.jsonl`, [line({ time: new Date(started + 2000).toISOString(), text: "halfway" }), `{"time":"torn`].join("\n"))
      const t = yield* timelineOf(record, dir)
      expect(t.entries.map((e) => e.kind)).toEqual(["turn", "prompt", "message", "assistant"])
      expect(t.entries[2]).toMatchObject({ kind: "message", text: "halfway" })
      expect(t.more).toBe(0)
    }).pipe(Effect.provide(unitLayer(paths)))
  })
})
