import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { allowLines, appendToOrgToml } from "../../src/config/appendAllow.js"
import { layout, Paths } from "../../src/config/Paths.js"
import { tempPaths } from "../support/harness.js"

describe("an approval's [[allow]] appended to org.toml (issue 64.7)", () => {
  it.effect("keeps what the file says; none yet starts one; one that cannot be read is never written over", () => {
    const paths = tempPaths()
    const file = layout(paths).orgToml
    fs.mkdirSync(path.dirname(file), { recursive: true })
    const layer = Layer.mergeAll(NodeContext.layer, Paths.layerAt(paths))
    return Effect.gen(function*() {
      yield* appendToOrgToml(allowLines("alice", "a.example.com", 443, "anna", "2026-12-08T00:00:00.000Z"))
      expect(fs.readFileSync(file, "utf8")).toBe("# approved by anna on 2026-12-08T00:00:00.000Z (roster approve --always)\n[[allow]]\nhosts = [\"a.example.com\"]\nports = [443]\nscope = [\"org/alice\"]\n")
      yield* appendToOrgToml(allowLines("bob", "b.example.com", 443, "anna", "2026-12-08T00:00:00.000Z"))
      expect(fs.readFileSync(file, "utf8")).toContain("scope = [\"org/alice\"]\n\n# approved by anna on 2026-12-08T00:00:00.000Z (roster approve --always)\n[[allow]]\nhosts = [\"b.example.com\"]")
      fs.rmSync(file)
      fs.mkdirSync(file)
      yield* Effect.flip(appendToOrgToml(allowLines("alice", "c.example.com", 443, "anna", "2026-12-08T00:00:00.000Z")))
      expect(fs.statSync(file).isDirectory()).toBe(true)
    }).pipe(Effect.provide(layer))
  })
})
