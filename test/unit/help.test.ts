import { describe, expect, it } from "vitest"
import { helpWidth, rootHelp, wrapHelp, wrapLine } from "../../src/cli/helpLayout.js"

const words = (t: string) => t.split(/\s+/).filter((w) => w !== "")

describe("help at a terminal's width", () => {
  it("wraps at word boundaries: a paragraph, a usage line (hanging), a table row under its column", () => {
    const para = "Run one pi session for a worker in a locked-down box. Prints how the box ended and where its outputs are."
    const lines = wrapLine(para, 40)
    expect(lines.every((l) => l.length <= 40)).toBe(true)
    expect(words(lines.join(" "))).toEqual(words(para))
    expect(wrapLine("$ roster task add [--json] [--ceiling float] [--after text] <worker> <prompt>...", 40)[1]).toMatch(/^ {4}\S/)
    const row = wrapLine("  - worker add [--identity file] <worker>      Add a worker: workers/<name>/identity.md (who it is) and worker.toml.", 100)
    expect(row[1]).toMatch(/^ {47}\S/)
    expect(row.every((l) => l.length <= 100)).toBe(true)
    // A name column wider than half the page: the description goes under it, indented.
    const wide = wrapLine(`  - ${"x".repeat(50)}  ${"word ".repeat(30)}`, 80)
    expect(wide[0]?.trim()).toBe(`- ${"x".repeat(50)}`)
    expect(wide[1]).toMatch(/^ {6}word/)
    // One word longer than the line stands alone, whole.
    const long = wrapLine(`see ${"a".repeat(100)} now`, 40)
    expect(long).toEqual(["see", "a".repeat(100), "now"])
    expect(wrapHelp("short\n\nlines", 20)).toBe("short\n\nlines")
  })

  it("the width: the terminal's, else COLUMNS, else 80", () => {
    expect(helpWidth({ isTTY: true, columns: 132 })).toBe(132)
    const before = process.env.COLUMNS
    try {
      delete process.env.COLUMNS
      expect(helpWidth({ isTTY: false })).toBe(80)
      process.env.COLUMNS = "120"
      expect(helpWidth({ isTTY: false })).toBe(120)
    } finally {
      if (before === undefined) delete process.env.COLUMNS
      else process.env.COLUMNS = before
    }
  })

  it("the root page groups the commands, one line each, with examples; an ungrouped command is listed under Other", () => {
    const page = rootHelp([
      "roster", "", "USAGE", "", "$ roster", "", "DESCRIPTION", "", "Run AI workers. Start with: roster init", "", "COMMANDS", "",
      "  - worker                       Manage workers.", "",
      "  - worker run [--ceiling float] <worker> <prompt>...  Run one pi session for a worker in a locked-down box. Prints more.", "",
      "  - frob                         Frobnicate; a command no group names.", ""
    ].join("\n"), "9.9.9", 80)
    expect(page).toContain("RUN A WORKER\n\n  worker run  Run one pi session for a worker in a locked-down box.\n")
    expect(page).not.toMatch(/^ {2}worker {2}/m)
    expect(page).toContain("OTHER\n\n  frob")
    expect(page).toContain("EXAMPLES\n\n  roster init")
    expect(page.split("\n").every((l) => l.length <= 80)).toBe(true)
  })

  it("the root page at any width is its widest page wrapped (what bin/roster.js prints without loading the program)", () => {
    const plain = [
      "roster", "", "USAGE", "", "$ roster", "", "DESCRIPTION", "",
      "Run AI workers (the pi coding agent) in locked-down Docker boxes whose only way out is roster's gateway. Start with: roster init", "",
      "COMMANDS", "",
      "  - worker run [--ceiling float] <worker> <prompt>...  Run one pi session for a worker in a locked-down box; its answer is printed as it comes.", "",
      "  - task add <worker> <prompt>  Queue a task for a worker: the daemon runs it when there is room.", "",
      "  - approve <host>  Allow a host a worker asked for.", ""
    ].join("\n")
    const widest = rootHelp(plain, "9.9.9", 1000)
    for (let width = 21; width <= 200; width++) expect(wrapHelp(widest, width), `at ${width} columns`).toBe(rootHelp(plain, "9.9.9", width))
  })
})
