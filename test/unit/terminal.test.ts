import { describe, expect, it } from "vitest"
import { visible } from "../../src/cli/terminal.js"

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
