import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as fs from "node:fs"
import { layout } from "../../src/config/Paths.js"
import { lookAgainNow } from "../../src/fs/stamp.js"
import { makeWorkerSettingsCache } from "../../src/worker/workers.js"
import { tempPaths, unitLayer, writeFixture } from "../support/harness.js"

describe("a worker.toml that stops decoding mid-run", () => {
  it.effect("keeps the last good limits (an edit half-saved does not lift a budget); the next good edit is read; with none good before, the error stands", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const file = layout(paths).workerToml("alice")
    const write = (text: string) => Effect.zipRight(Effect.sync(() => fs.writeFileSync(file, text)), lookAgainNow)
    return Effect.gen(function*() {
      const settings = makeWorkerSettingsCache()
      yield* write("[budget]\nrun_tokens = 100\n")
      expect((yield* settings("alice")).budget?.run_tokens).toBe(100)
      yield* write("[budget]\nrun_tokens = \"lots\"\n")
      expect((yield* settings("alice")).budget?.run_tokens).toBe(100)
      // Asked again without an edit: still the good one, not the error.
      expect((yield* settings("alice")).budget?.run_tokens).toBe(100)
      yield* write("[budget]\nrun_tokens = 50\n")
      expect((yield* settings("alice")).budget?.run_tokens).toBe(50)
      // A cache that never read a good one: the error, for the caller to go by org.toml's limits.
      const fresh = makeWorkerSettingsCache()
      yield* write("[budget\n")
      expect(Either.isLeft(yield* Effect.either(fresh("alice")))).toBe(true)
    }).pipe(Effect.provide(unitLayer(paths)))
  })
})
