import { describe, expect, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, Fiber, Option, Stream, TestClock } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { listSnapshots } from "../../src/box/store.js"
import { runOnce } from "../../src/box/runOnce.js"
import { layout } from "../../src/config/Paths.js"
import { type FakeOp, DockerFake } from "../../src/docker/DockerTest.js"
import { RunLog } from "../../src/run/RunLog.js"
import { eventually, tempPaths, unitLayer, writeFixture } from "../support/harness.js"

type Paths = ReturnType<typeof tempPaths>

const tokens = (paths: Paths) => (fs.existsSync(layout(paths).identityDir) ? fs.readdirSync(layout(paths).identityDir) : [])
const onlyRecord = (paths: Paths) => {
  const dir = layout(paths).workerRunsDir("alice")
  const ids = fs.existsSync(dir) ? fs.readdirSync(dir) : []
  expect(ids).toHaveLength(1)
  return JSON.parse(fs.readFileSync(path.join(dir, ids[0] ?? "", "run.json"), "utf8")) as Record<string, unknown>
}
const liveContainers = Effect.map(DockerFake, (fake) => [...fake.containers.values()].filter((c) => c.state !== "removed"))

/** A deployment whose worker already keeps a file in its store (so the run's end has a snapshot to take). */
const withStoredNote = () => {
  const paths = tempPaths()
  writeFixture({ paths })
  fs.mkdirSync(layout(paths).storeDir("alice"), { recursive: true })
  fs.writeFileSync(path.join(layout(paths).storeDir("alice"), "notes.txt"), "kept")
  return paths
}

/** What an interrupted run must leave: no container, no token, a record finished as ended by signal. */
const expectEndedBySignal = (paths: Paths) =>
  Effect.gen(function*() {
    expect(yield* liveContainers).toEqual([])
    expect(tokens(paths)).toEqual([])
    const record = onlyRecord(paths)
    expect(record.ended_by).toBe("signal")
    expect(record.finished_at).toEqual(expect.any(String))
  })

/** Real-time polling of a fiber that should end: its Exit, or None — so a missing kill fails an assertion, not the test's timeout. */
const ended = <A, E>(fiber: Fiber.Fiber<A, E>, ms = 3000) =>
  Effect.gen(function*() {
    const deadline = Date.now() + ms
    for (;;) {
      const polled = yield* Fiber.poll(fiber)
      if (Option.isSome(polled) || Date.now() > deadline) return polled
      yield* Effect.promise(() => new Promise((r) => setTimeout(r, 5)))
    }
  })

describe("openBox: a run is a scoped resource (Docker test layer)", () => {
  // Each step of opening a box, held where the fake engine (or the run) is when the interrupt lands.
  const steps: ReadonlyArray<readonly [string, FakeOp | "running"]> = [
    ["during the lockdown", "networkInspect"],
    ["after the token, before the container", "containerCreate"],
    ["after create, before start", "containerAttach"],
    ["after start, while the box runs", "running"]
  ]
  for (const [when, op] of steps) {
    it.effect(`an interrupt ${when} leaves no container, no token, and a finished record`, () => {
      const paths = tempPaths()
      writeFixture({ paths })
      const layer = unitLayer(paths, {
        docker: {
          script: () => ({ hang: true }),
          before: (called) => (called === op ? Effect.never : Effect.void)
        }
      })
      return Effect.gen(function*() {
        const fake = yield* DockerFake
        const fiber = yield* Effect.fork(runOnce({ worker: "alice", prompt: "work" }))
        yield* eventually(op === "running"
          ? Effect.sync(() => [...fake.containers.values()].some((c) => c.state === "running"))
          : fake.waitFor(op).pipe(Effect.as(true)), `the run to reach ${op}`)
        const exit = yield* Fiber.interrupt(fiber)
        expect(Exit.isInterrupted(exit)).toBe(true)
        yield* expectEndedBySignal(paths)
      }).pipe(Effect.provide(layer))
    })
  }

  it.effect("an interrupt after the box exited, while its outputs are read, still finishes the record", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const reading = Effect.runSync(Deferred.make<void>())
    const layer = unitLayer(paths, {
      docker: { script: () => ({ stdout: ["{\"type\":\"session\"}\n"], exitCode: 0 }) },
      fs: (real) => ({
        stream: (file, options) =>
          file.endsWith("messages.jsonl")
            ? Stream.fromEffect(Deferred.succeed(reading, undefined).pipe(Effect.zipRight(Effect.never)))
            : real.stream(file, options)
      })
    })
    return Effect.gen(function*() {
      const fiber = yield* Effect.fork(runOnce({ worker: "alice", prompt: "work" }))
      yield* Deferred.await(reading)
      yield* Fiber.interrupt(fiber)
      yield* expectEndedBySignal(paths)
    }).pipe(Effect.provide(layer))
  })

  it.effect("a first interrupt lets a slow store snapshot finish; a second cuts it, and the record says interrupted", () => {
    const paths = withStoredNote()
    const copying = Effect.runSync(Deferred.make<void>())
    const release = Effect.runSync(Deferred.make<void>())
    const hurry = Effect.runSync(Deferred.make<void>())
    const layer = unitLayer(paths, {
      hurry,
      docker: { script: () => ({ exitCode: 0 }) },
      fs: (real) => ({
        copyFile: (from, to) =>
          Deferred.succeed(copying, undefined).pipe(Effect.zipRight(Deferred.await(release)), Effect.zipRight(real.copyFile(from, to)))
      })
    })
    return Effect.gen(function*() {
      const fiber = yield* Effect.fork(runOnce({ worker: "alice", prompt: "work" }))
      yield* Deferred.await(copying)
      // The first Ctrl-C: the run is already ending, the snapshot goes on.
      yield* Fiber.interruptFork(fiber)
      expect(Option.isNone(yield* ended(fiber, 200))).toBe(true)
      expect(fs.readdirSync(layout(paths).snapshotsDir("alice")).some((n) => n.endsWith(".partial"))).toBe(true)
      // The second: the copy is cut, the partial copy removed, the record finished.
      yield* Deferred.succeed(hurry, undefined)
      expect(Option.isSome(yield* ended(fiber))).toBe(true)
      const record = onlyRecord(paths)
      expect(record.store_snapshot).toBe("interrupted")
      expect(record.ended_by).toBe("exit")
      expect(record.finished_at).toEqual(expect.any(String))
      expect(yield* listSnapshots("alice")).toEqual([])
      expect(fs.readdirSync(layout(paths).snapshotsDir("alice"))).toEqual([])
    }).pipe(Effect.provide(layer))
  })

  it.effect("a store snapshot that fails is recorded and never fails the run", () => {
    const paths = withStoredNote()
    const layer = unitLayer(paths, {
      docker: { script: () => ({ exitCode: 0 }) },
      fs: (real) => ({
        copyFile: (from) =>
          Effect.flatMap(real.stat(from), () => Effect.fail(new (class extends Error {})("disk full") as never))
      })
    })
    return Effect.gen(function*() {
      const outcome = yield* runOnce({ worker: "alice", prompt: "work" })
      expect(outcome.exitCode).toBe(0)
      const record = yield* (yield* RunLog).read("alice", outcome.runId)
      expect(record?.ended_by).toBe("exit")
      expect(record?.store_snapshot).toBeNull()
      expect(record?.store_snapshot_error).toContain("copying the store")
      expect(yield* listSnapshots("alice")).toEqual([])
    }).pipe(Effect.provide(layer))
  })

  it.effect("a create that fails leaves the record ended by error with the engine's reason, no token", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const layer = unitLayer(paths, {
      docker: { before: (op) => (op === "containerCreate" ? Effect.die(new Error("engine went away")) : Effect.void) }
    })
    return Effect.gen(function*() {
      const exit = yield* Effect.exit(runOnce({ worker: "alice", prompt: "work" }))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(tokens(paths)).toEqual([])
      const record = onlyRecord(paths)
      expect(record.ended_by).toBe("error")
      expect(String(record.error)).toContain("engine went away")
    }).pipe(Effect.provide(layer))
  })

  it.effect("the ceiling kills the box: the run ends (asserted, not waited for) by ceiling", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    return Effect.gen(function*() {
      const fiber = yield* Effect.fork(runOnce({ worker: "alice", prompt: "loop", ceilingMin: 5 }))
      yield* eventually(Effect.map(liveContainers, (cs) => cs.some((c) => c.state === "running")), "the box to run")
      yield* TestClock.adjust("5 minutes")
      const exit = yield* ended(fiber)
      expect(Option.isSome(exit), "the run ended after its ceiling").toBe(true)
      const outcome = yield* Fiber.join(fiber)
      expect(outcome.endedBy).toBe("ceiling")
      expect(yield* liveContainers).toEqual([])
    }).pipe(Effect.provide(unitLayer(paths, { docker: { script: () => ({ hang: true }) } })))
  })

  it.effect("a bad worker name is refused even when a folder of that name exists", () => {
    const paths = tempPaths()
    writeFixture({ paths, workers: ["alice", "Alice"] })
    return Effect.gen(function*() {
      const exit = yield* Effect.exit(runOnce({ worker: "Alice", prompt: "x" }))
      const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
      expect(Option.isSome(failure) && (failure.value as { _tag?: string })._tag).toBe("InvalidWorkerName")
      expect(yield* (yield* DockerFake).callsOf("networkInspect")).toEqual([])
      expect(fs.existsSync(layout(paths).runsDir)).toBe(false)
    }).pipe(Effect.provide(unitLayer(paths)))
  })
})

