import { describe, expect, it } from "vitest"
import { visible } from "../../src/cli/terminal.js"
import { renderReport } from "../../src/report/renderReport.js"
import { notice, output, progress, progressDone, type Report, step } from "../../src/report/Reporter.js"

describe("box text on a terminal", () => {
  it("shows every control character instead of obeying it, and keeps newlines, tabs and ordinary text", () => {
    const attack = "title\x1b]0;pwned\x07 clip\x1b]52;c;ZXZpbA==\x07 clear\x1b[2J\x1b[H cr\rover del\x7f c1\x9b31m bidi\u202Egnp.exe"
    const shown = visible(attack)
     
    expect(shown).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202e]/)
    expect(shown).toContain("␛]0;pwned␇")
    expect(shown).toContain("cr␍over")
    expect(shown).toContain("<U+009B>31m")
    expect(shown).toContain("<U+202E>gnp.exe")
    expect(visible("line one\n\tindented — naïve 日本 ✓")).toBe("line one\n\tindented — naïve 日本 ✓")
  })
})

describe("roster's reports on a terminal", () => {
  const render = (isTTY: boolean, reports: ReadonlyArray<Report>) => {
    let out = ""
    for (const r of reports) renderReport(r, { isTTY, columns: 40, write: (s) => (out += s) })
    return out
  }
  const reports: ReadonlyArray<Report> = [
    step("box build", "1/5 the root filesystem"),
    progress("pull x", "layer a: Downloading [=>   ] 1MB/20MB"),
    progress("pull x", `layer b: ${"x".repeat(80)}`),
    progressDone("pull x"),
    output("box build", "Step 1/3 : FROM scratch"),
    notice("could not pull x — running the local copy", "warning")
  ]

  it("on a TTY, progress is one line rewritten in place and cut to the width; the rest are lines", () => {
    const out = render(true, reports)
    expect(out).toContain("1/5 the root filesystem\n")
    expect(out).toContain("\r\x1b[Klayer a: Downloading")
    expect(out).not.toContain("x".repeat(40))
    expect(out).toContain("    Step 1/3 : FROM scratch\n")
    expect(out).toContain("note: could not pull x — running the local copy\n")
  })

  it("into a pipe, no progress and no escape sequence at all", () => {
    const out = render(false, reports)
    expect(out).not.toContain("\x1b")
    expect(out).not.toContain("Downloading")
    expect(out.split("\n").filter((l) => l !== "")).toEqual([
      "1/5 the root filesystem", "    Step 1/3 : FROM scratch", "note: could not pull x — running the local copy"
    ])
  })
})
