import { FileSystem } from "@effect/platform"
import { SystemError } from "@effect/platform/Error"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodePath from "@effect/platform-node/NodePath"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Logger } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { mintIdentity, revokeRunTokens } from "../../src/box/identity.js"
import { layout, Paths } from "../../src/config/Paths.js"
import { tempPaths } from "../support/harness.js"

/** The machine's file system, but one operation refused (a read-only or damaged state folder). */
const refusing = (method: "remove" | "readDirectory") =>
  Layer.effect(
    FileSystem.FileSystem,
    Effect.map(FileSystem.FileSystem, (real) => ({
      ...real,
      [method]: (p: string) => Effect.fail(new SystemError({ reason: "PermissionDenied", module: "FileSystem", method, pathOrDescriptor: p }))
    }))
  ).pipe(Layer.provide(NodeFileSystem.layer))

describe("a run's gateway token that cannot be removed", () => {
  it.effect("is said with its file and the fix, at the run's end and at a revocation, and never counted as revoked", () => {
    const paths = tempPaths()
    const logged: Array<string> = []
    const logger = Logger.make(({ message }) => void logged.push(String(message)))
    return Effect.gen(function*() {
      const identity = yield* Effect.scoped(mintIdentity("alice", "2026-12-06-00-00-00-0000abcd", null))
      // Its run's scope closed: the file is still there, and the warning names it.
      expect(fs.existsSync(identity.file)).toBe(true)
      expect(logged.filter((l) => l.includes(`rm ${identity.file}`))).toHaveLength(1)
      expect(yield* revokeRunTokens("2026-12-06-00-00-00-0000abcd")).toBe(0)
      expect(logged.filter((l) => l.includes(`rm ${identity.file}`))).toHaveLength(2)
      expect(path.dirname(identity.file)).toBe(layout(paths).identityDir)
    }).pipe(Effect.provide(Layer.mergeAll(refusing("remove"), NodePath.layer, Paths.layerAt(paths))), Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
  })

  it.effect("a token folder that cannot be read is said with the folder; no folder at all (no token yet) is nothing to say", () => {
    const paths = tempPaths()
    const logged: Array<string> = []
    const logger = Logger.make(({ message }) => void logged.push(String(message)))
    const run = "2026-12-06-00-00-00-0000abcd"
    return Effect.gen(function*() {
      expect(yield* revokeRunTokens(run).pipe(Effect.provide(Layer.mergeAll(NodeFileSystem.layer, NodePath.layer, Paths.layerAt(paths))))).toBe(0)
      expect(logged).toEqual([])
      expect(yield* revokeRunTokens(run).pipe(Effect.provide(Layer.mergeAll(refusing("readDirectory"), NodePath.layer, Paths.layerAt(paths))))).toBe(0)
      expect(logged.filter((l) => l.includes(layout(paths).identityDir) && l.includes(run))).toHaveLength(1)
    }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
  })
})
