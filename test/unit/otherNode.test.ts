// The start-up benchmark runs a copy of bin/roster.js without its Node floor: the copy must reach every
// sibling the original imports (CI's smoke pass once failed on bin/handoff.js missing from the copy).
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { unflooredBin } from "../../bench/otherNode.mjs"

const root = path.resolve(__dirname, "../..")
const siblingImports = (file: string) =>
  [...fs.readFileSync(file, "utf8").matchAll(/import\s*\(?\s*(?:[^"']*from\s*)?["'](\.\/[^"']+)["']/g)].map((m) => m[1]!)

describe("the unfloored bin the start-up benchmark runs", () => {
  const copy = unflooredBin(root)
  const original = path.join(root, "bin", "roster.js")
  afterAll(() => fs.rmSync(path.dirname(path.dirname(copy)), { recursive: true, force: true }))

  it("reaches every sibling module bin/roster.js imports", () => {
    const wanted = siblingImports(original)
    expect(wanted).toContain("./handoff.js")
    for (const rel of wanted) expect(fs.existsSync(path.join(path.dirname(copy), rel)), rel).toBe(true)
  })

  it("has lost the Node floor and nothing else", () => {
    const before = fs.readFileSync(original, "utf8")
    const after = fs.readFileSync(copy, "utf8")
    expect(after).not.toMatch(/A maintained Node, first/)
    expect(before).toMatch(/A maintained Node, first/)
    expect(siblingImports(copy)).toEqual(siblingImports(original))
  })
})
