import { FileSystem } from "@effect/platform"
import { SystemError } from "@effect/platform/Error"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Logger } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { HANDOVER_FILE } from "../../src/box/warmHandOver.js"
import { layout } from "../../src/config/Paths.js"
import { makeState } from "../../src/supervisor/state.js"
import { sweepStrays } from "../../src/supervisor/strays.js"
import { tempPaths, unitLayer } from "../support/harness.js"

const WARM = "2026-12-08-01-00-00-0000a0a0"
const TAKEN = "2026-12-08-01-00-01-0000b0b0"
/** A daemon that is gone: no process has this pid. */
const DEAD = { pid: 2 ** 22 + 17, start: "0" }

/** The machine's file system, but removing anything under `under` refused (a read-only or damaged folder). */
const refusingRemoveUnder = (under: ReadonlyArray<string>) =>
  Layer.effect(
    FileSystem.FileSystem,
    Effect.map(FileSystem.FileSystem, (real) => ({
      ...real,
      remove: (p: string, o?: FileSystem.RemoveOptions) =>
        under.some((u) => p === u || p.startsWith(u + path.sep))
          ? Effect.fail(new SystemError({ reason: "PermissionDenied", module: "FileSystem", method: "remove", pathOrDescriptor: p }))
          : real.remove(p, o)
    }))
  )

describe("the sweep of boxless runs says what it could not remove, with the command (issue 64.5)", () => {
  it.scoped("a stale token, a warm box's folder no run took and a dead daemon's hand-over folder: each refused removal is a warning naming the path and the fix; nothing is said twice as removed", () => {
    const paths = tempPaths()
    const files = layout(paths)
    const logged: Array<string> = []
    const logger = Logger.make(({ message }) => void logged.push(String(message)))
    fs.mkdirSync(files.identityDir, { recursive: true })
    // A token no one can read, and a warm box's token whose box is gone (its daemon killed).
    const garbage = path.join(files.identityDir, `${"a".repeat(64)}.json`)
    fs.writeFileSync(garbage, "{not json")
    const warmToken = path.join(files.identityDir, `${"b".repeat(64)}.json`)
    fs.writeFileSync(warmToken, JSON.stringify({ subject: "org/alice", run_id: WARM, worker: "alice", task_id: null, warm: true, maker: DEAD }))
    fs.mkdirSync(files.runDir("alice", WARM), { recursive: true })
    // A folder a dead daemon was handing to a run before the run's record was in.
    fs.mkdirSync(files.runDir("alice", TAKEN), { recursive: true })
    fs.writeFileSync(path.join(files.runDir("alice", TAKEN), HANDOVER_FILE), JSON.stringify({ from: "2026-12-08-00-59-00-0000c0c0", to: TAKEN, maker: DEAD }))
    // A token file that cannot be read now (here: a folder by its name) may be a live run's: left, and said.
    const unreadable = path.join(files.identityDir, `${"c".repeat(64)}.json`)
    fs.mkdirSync(unreadable)
    const refused = refusingRemoveUnder([garbage, files.runDir("alice", WARM), files.runDir("alice", TAKEN)])
    return Effect.gen(function*() {
      const st = yield* makeState(Date.now())
      yield* sweepStrays(st).pipe(Effect.provide(refused), Effect.provide(unitLayer(paths)))
      const token = logged.find((l) => l.startsWith("the token of an unreadable identity file"))
      expect(token).toMatch(new RegExp(`could not be removed \\(.*PermissionDenied.*\\): remove it with: rm ${garbage}$`))
      const warm = logged.find((l) => l.startsWith(`the folder of warm box ${WARM}`))
      expect(warm).toMatch(new RegExp(`\\(no run took it\\) could not be removed \\(.*\\): remove it with: rm -rf ${files.runDir("alice", WARM)}$`))
      expect(logged).toContain(`removed the token of run ${WARM}, which is over`)
      const handOver = logged.find((l) => l.startsWith(`run folder ${TAKEN} of alice`))
      expect(handOver).toMatch(/a hand-over its dead daemon left could not be cleared \(.*\); remove it by hand$/)
      expect(logged.filter((l) => l.startsWith("removed the folder"))).toEqual([])
      expect(logged).toContainEqual(expect.stringMatching(new RegExp(`^the token file ${unreadable} could not be read \\(.*\\): left as it is, looked at again in 3 s$`)))
      expect(fs.existsSync(unreadable)).toBe(true)
      // What could not go is still there, and the next sweep (with the folder writable again) clears it.
      expect(fs.existsSync(garbage) && fs.existsSync(files.runDir("alice", WARM)) && fs.existsSync(files.runDir("alice", TAKEN))).toBe(true)
      logged.length = 0
      yield* sweepStrays(st).pipe(Effect.provide(unitLayer(paths)))
      expect(fs.existsSync(garbage) || fs.existsSync(files.runDir("alice", TAKEN))).toBe(false)
      expect(logged).toContain(`removed the token of an unreadable identity file ${"a".repeat(64)}.json`)
    }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
  })
})
