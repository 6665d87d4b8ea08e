import { describe, expect, it } from "vitest"
import { readRunArgs } from "../../bin/handoff.js"

describe("worker run's words as the handing-over CLI reads them (bin/handoff.js)", () => {
  it("reads the worker, the prompt's words and the two options wherever they stand, spaced or with =", () => {
    expect(readRunArgs(["alice", "fix", "the", "test"])).toEqual({ worker: "alice", prompt: "fix the test", channel: null })
    expect(readRunArgs(["--ceiling", "2.5", "--channel=ops", "alice", "x"])).toEqual({ worker: "alice", prompt: "x", ceiling_min: 2.5, channel: "ops" })
    expect(readRunArgs(["--ceiling=10", "alice", ""])).toEqual({ worker: "alice", prompt: "", ceiling_min: 10, channel: null })
    expect(readRunArgs(["alice", "--ceiling", "5", "fix", "it", "--channel", "ops"])).toEqual({ worker: "alice", prompt: "fix it", ceiling_min: 5, channel: "ops" })
  })

  it("leaves to the program anything else: other flags, a word that looks like one, a repeated or valueless option, a ceiling not a plain number, no prompt", () => {
    for (const words of [
      ["--json", "alice", "x"], ["-h"], ["alice", "x", "--ceiling"], ["alice", "-5", "degrees"], ["alice", "--channel", "--ceiling", "5", "x"], ["--ceiling", "1", "--ceiling", "2", "alice", "x"],
      ["--ceiling"], ["--ceiling", "abc", "alice", "x"], ["--ceiling", "-1", "alice", "x"], ["--ceiling", "1e3", "alice", "x"], ["alice"], [], ["--", "alice", "x"]
    ]) expect(readRunArgs(words), words.join(" ")).toBeUndefined()
  })
})
