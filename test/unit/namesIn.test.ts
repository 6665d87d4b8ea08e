import { FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Logger } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { namesIn } from "../../src/fs/namesIn.js"

describe("a folder listed for what it holds (issue 64.7)", () => {
  it.effect("its names; none and nothing said when it does not exist yet; none, said with the folder, when it cannot be read", () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "roster-names-"))
    fs.mkdirSync(path.join(root, "runs", "alice"), { recursive: true })
    fs.writeFileSync(path.join(root, "not-a-folder"), "")
    const logged: Array<string> = []
    const logger = Logger.make(({ message }) => void logged.push(String(message)))
    return Effect.gen(function*() {
      const files = yield* FileSystem.FileSystem
      expect(yield* namesIn(files, path.join(root, "runs"), "the runs")).toEqual(["alice"])
      expect(yield* namesIn(files, path.join(root, "none-yet"), "the runs")).toEqual([])
      expect(logged).toEqual([])
      expect(yield* namesIn(files, path.join(root, "not-a-folder"), "the runs")).toEqual([])
      expect(logged).toHaveLength(1)
      expect(logged[0]).toMatch(new RegExp(`^the runs could not be listed \\(.*\\): what is in ${path.join(root, "not-a-folder")} is left out until it can$`))
    }).pipe(Effect.provide(NodeContext.layer), Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
  })
})
