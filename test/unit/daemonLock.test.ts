import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { layout } from "../../src/config/Paths.js"
import { holdDaemonLock, lockHolder } from "../../src/daemon/lock.js"
import { tempPaths, unitLayer, writeFixture } from "../support/harness.js"

/** A pid that surely names no process now: one of a child that has exited. */
const deadPid = () => spawnSync("true").pid ?? 999_999

describe("the daemon lock (state/daemon.lock)", () => {
  it.live("is made exclusively, refuses a second holder while the first lives, and is removed when its scope closes", () => {
    const paths = tempPaths()
    writeFixture({ paths, gateway: null })
    const file = layout(paths).daemonLock
    return Effect.gen(function*() {
      const scope = yield* Scope.make()
      const held = yield* holdDaemonLock.pipe(Scope.extend(scope))
      expect(held.pid).toBe(process.pid)
      expect(fs.statSync(file).mode & 0o777).toBe(0o600)
      expect((yield* lockHolder)?.pid).toBe(process.pid)
      // A second start of this deployment (here the same process, alive) is refused and changes nothing.
      const before = fs.readFileSync(file, "utf8")
      const second = yield* Effect.scoped(holdDaemonLock).pipe(Effect.flip)
      expect(second._tag).toBe("DaemonRunning")
      expect(second.message).toContain("roster server stop")
      expect(fs.readFileSync(file, "utf8")).toBe(before)
      yield* Scope.close(scope, Exit.void)
      expect(fs.existsSync(file)).toBe(false)
      expect(yield* lockHolder).toBeUndefined()
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.live("is taken over from a dead owner, a garbled file, or an empty one", () => {
    const paths = tempPaths()
    writeFixture({ paths, gateway: null })
    const file = layout(paths).daemonLock
    return Effect.gen(function*() {
      for (const left of [JSON.stringify({ pid: deadPid(), start: "1", started_at: "2026-01-01T00:00:00.000Z" }), "{garbage", ""]) {
        fs.writeFileSync(file, left)
        yield* Effect.scoped(Effect.gen(function*() {
          const held = yield* holdDaemonLock
          expect(held.pid).toBe(process.pid)
          expect(JSON.parse(fs.readFileSync(file, "utf8")).pid).toBe(process.pid)
        }))
        expect(fs.existsSync(file)).toBe(false)
      }
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.live("a lock whose holder was killed but not yet reaped (a zombie) is taken over", () => {
    const paths = tempPaths()
    writeFixture({ paths, gateway: null })
    const file = layout(paths).daemonLock
    // The child is killed only once the shell has become the exec'd sleep, which never waits for
    // children — so it stays a zombie. Killing it earlier would race the shell reaping it.
    const parent = spawn("sh", ["-c", "sleep 30 & echo $!; exec sleep 30"], { stdio: ["ignore", "pipe", "ignore"] })
    const stat = (pid: number) => { try { return fs.readFileSync(`/proc/${pid}/stat`, "utf8") } catch { return "" } }
    const until = (test: () => boolean) => Effect.gen(function*() {
      for (let i = 0; i < 100 && !test(); i++) yield* Effect.sleep("50 millis")
    })
    return Effect.gen(function*() {
      const zombie = Number(yield* Effect.promise(() => new Promise<string>((r) => parent.stdout?.once("data", (c: Buffer) => r(c.toString())))))
      yield* until(() => stat(parent.pid!).includes("(sleep)"))
      expect(stat(parent.pid!)).toContain("(sleep)")
      process.kill(zombie, "SIGKILL")
      const zombied = () => /\) Z /.test(stat(zombie))
      yield* until(zombied)
      expect(zombied()).toBe(true)
      fs.writeFileSync(file, JSON.stringify({ pid: zombie, start: "", started_at: "2026-01-01T00:00:00.000Z" }))
      expect(yield* lockHolder).toBeUndefined()
      expect((yield* Effect.scoped(holdDaemonLock)).pid).toBe(process.pid)
    }).pipe(Effect.ensuring(Effect.sync(() => parent.kill("SIGKILL"))), Effect.provide(unitLayer(paths)))
  })

  it.live("a pid reused by another process (its start time differs) does not hold the lock", () => {
    const paths = tempPaths()
    writeFixture({ paths, gateway: null })
    const file = layout(paths).daemonLock
    fs.writeFileSync(file, JSON.stringify({ pid: process.pid, start: "1", started_at: "2026-01-01T00:00:00.000Z" }))
    return Effect.gen(function*() {
      expect(yield* lockHolder).toBeUndefined()
      yield* Effect.scoped(holdDaemonLock)
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.live("many starts at once over a dead owner's lock: exactly one holds it", () => {
    const paths = tempPaths()
    writeFixture({ paths, gateway: null })
    const file = layout(paths).daemonLock
    fs.writeFileSync(file, JSON.stringify({ pid: deadPid(), start: "1", started_at: "2026-01-01T00:00:00.000Z" }))
    return Effect.gen(function*() {
      const scope = yield* Scope.make()
      const results = yield* Effect.all(Array.from({ length: 8 }, () => holdDaemonLock.pipe(Scope.extend(scope), Effect.either)), { concurrency: "unbounded" })
      // One process, so every attempt is "alive": the first wins, the rest see it hold the lock.
      expect(results.filter((r) => r._tag === "Right")).toHaveLength(1)
      expect(results.filter((r) => r._tag === "Left").map((r) => r._tag === "Left" && r.left._tag)).toEqual(Array(7).fill("DaemonRunning"))
      yield* Scope.close(scope, Exit.void)
    }).pipe(Effect.provide(unitLayer(paths)))
  })
})
