import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { orgTomlCheck } from "../../src/cli/doctorCommand.js"
import { OrgConfig } from "../../src/config/OrgConfig.js"
import { layout, Paths } from "../../src/config/Paths.js"
import { tempPaths } from "../support/harness.js"

describe("roster doctor's org.toml check (issue 64.7)", () => {
  it.effect("an org.toml that reads is ok; one that does not is FAILING with why — never the other checks' defaults taken for its settings", () => {
    const paths = tempPaths()
    const file = layout(paths).orgToml
    fs.mkdirSync(path.dirname(file), { recursive: true })
    const layer = OrgConfig.layer.pipe(Layer.provide(Layer.mergeAll(NodeContext.layer, Paths.layerAt(paths))))
    return Effect.gen(function*() {
      // Before roster init: none, and nothing failing.
      expect(yield* orgTomlCheck.pipe(Effect.provide(layer))).toEqual({ ok: true, absent: true })
      fs.writeFileSync(file, "[box]\nruntime = \"runc\"\n")
      expect(yield* orgTomlCheck.pipe(Effect.provide(layer))).toEqual({ ok: true })
      fs.writeFileSync(file, "[box]\nruntime = \"runc\"\n[[grant]\n")
      const failing = yield* orgTomlCheck.pipe(Effect.provide(layer))
      expect(failing.ok).toBe(false)
      expect(failing).toMatchObject({ detail: expect.stringContaining("org.toml") })
    })
  })
})

describe("a config file that is there and cannot be read (issue 64.7)", () => {
  it.effect("says it cannot be read — never 'does not exist, run roster init'", () => {
    const paths = tempPaths()
    const file = layout(paths).orgToml
    fs.mkdirSync(file, { recursive: true })
    const layer = OrgConfig.layer.pipe(Layer.provide(Layer.mergeAll(NodeContext.layer, Paths.layerAt(paths))))
    return Effect.gen(function*() {
      const failing = yield* orgTomlCheck.pipe(Effect.provide(layer))
      expect(failing).toMatchObject({ ok: false, detail: expect.stringContaining("cannot be read") })
      expect(JSON.stringify(failing)).not.toContain("does not exist")
    })
  })
})
