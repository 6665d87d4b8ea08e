import { describe, expect, it } from "@effect/vitest"
import { Cause, Clock, Effect, Exit, Fiber, TestClock } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { runOnce } from "../../src/box/runOnce.js"
import { layout } from "../../src/config/Paths.js"
import { DockerError } from "../../src/docker/Docker.js"
import { DockerFake } from "../../src/docker/DockerTest.js"
import { RunLog } from "../../src/run/RunLog.js"
import { eventually, tempPaths, unitLayer, writeFixture } from "../support/harness.js"

const setup = (script: Parameters<typeof unitLayer>[1] = {}) => {
  const paths = tempPaths()
  writeFixture({ paths })
  return { paths, layer: unitLayer(paths, script) }
}

const identityFiles = (paths: ReturnType<typeof tempPaths>) => {
  const dir = layout(paths).identityDir
  return fs.existsSync(dir) ? fs.readdirSync(dir) : []
}

const running = Effect.gen(function*() {
  const fake = yield* DockerFake
  return [...fake.containers.values()].find((c) => c.state === "running")
})

describe("roster worker run (Docker test layer)", () => {
  it.effect("with the engine down: says so and how to start it, and writes no run record", () => {
    const { layer, paths } = setup({ docker: { up: false } })
    return Effect.gen(function*() {
      const exit = yield* Effect.exit(runOnce({ worker: "alice", prompt: "hello" }))
      expect(Exit.isFailure(exit)).toBe(true)
      const text = Exit.isFailure(exit) ? String(Cause.squash(exit.cause)) : ""
      expect(text).toMatch(/the Docker engine is not answering.*dockerd &/)
      expect(fs.existsSync(layout(paths).runsDir)).toBe(false)
    }).pipe(Effect.provide(layer))
  })

  it.effect("a failed preflight ends the run with its reason and fix, recorded in run.json; its killed box exits 97", () => {
    const line = `{"type":"roster_preflight","ok":false,"check":"gateway","detail":"the gateway at host.docker.internal:7300 does not answer"}\n`
    const { layer } = setup({ docker: { script: () => ({ stdout: [line], exitCode: 137 }) } })
    return Effect.gen(function*() {
      const outcome = yield* runOnce({ worker: "alice", prompt: "hello" })
      expect(outcome.exitCode).toBe(97)
      expect(outcome.error).toMatch(/^the box's preflight failed: the gateway at host\.docker\.internal:7300 does not answer — .*roster doctor --fix/)
      const record = yield* (yield* RunLog).read("alice", outcome.runId)
      expect(record?.preflight).toEqual({ ok: false, check: "gateway", detail: "the gateway at host.docker.internal:7300 does not answer" })
      expect(record?.error).toBe(outcome.error)
    }).pipe(Effect.provide(layer))
  })

  it.effect("a passing preflight line printed by the box is not taken (only the gateway's record of the check is)", () => {
    const line = `{"type":"roster_preflight","ok":true,"check":"all","detail":"trust me"}\n`
    const { layer } = setup({ docker: { script: () => ({ stdout: [line], exitCode: 0 }) } })
    return Effect.gen(function*() {
      const outcome = yield* runOnce({ worker: "alice", prompt: "hello" })
      expect(outcome.exitCode).toBe(0)
      const record = yield* (yield* RunLog).read("alice", outcome.runId)
      expect(record?.preflight).toBeUndefined()
    }).pipe(Effect.provide(layer))
  })

  it("an engine error that is no answer at all says the engine is not answering, whichever call met it", () => {
    const raw = new DockerError({ operation: "network inspect", detail: "connect ENOENT /var/run/docker.sock" })
    expect(raw.message).toMatch(/^the Docker engine is not answering \(docker network inspect: connect ENOENT \/var\/run\/docker.sock\)\. Start it/)
    const answered = new DockerError({ operation: "create", detail: "Conflict. The container name is already in use", statusCode: 409 })
    expect(answered.message).toBe("docker create failed: Conflict. The container name is already in use")
  })

  it.effect("passes the box's exit code through and records the run", () => {
    const { layer, paths } = setup({ docker: { script: () => ({ stdout: ["{\"type\":\"session\"}\n"], exitCode: 3 }) } })
    return Effect.gen(function*() {
      const outcome = yield* runOnce({ worker: "alice", prompt: "do it" })
      expect(outcome.endedBy).toBe("exit")
      expect(outcome.exitCode).toBe(3)
      const record = yield* (yield* RunLog).read("alice", outcome.runId)
      expect(record?.ended_by).toBe("exit")
      expect(record?.exit_code).toBe(3)
      expect(record?.finished_at).not.toBeNull()
      expect(fs.readFileSync(path.join(outcome.runDir, "stdout.jsonl"), "utf8")).toBe("{\"type\":\"session\"}\n")
      expect(identityFiles(paths)).toEqual([])
      const context = JSON.parse(fs.readFileSync(path.join(outcome.runDir, "context.json"), "utf8"))
      expect(context.system_prompt).toContain("You are alice.")
      // The Start input: the surface and origin in one sentence, then the task.
      expect(context.input_prompt).toMatch(/^This is a direct run: a program embedding roster started it[^\n]*\n\n## Your task\ndo it$/)
      expect(context.cache.route_key).toMatch(/^roster-pc-[0-9a-f]{16}$/)
    }).pipe(Effect.provide(layer))
  })

  it.effect("kills the box at the ceiling, ends by ceiling and removes the token", () => {
    const { layer, paths } = setup({ docker: { script: () => ({ hang: true }) } })
    return Effect.gen(function*() {
      const startedAt = yield* Clock.currentTimeMillis
      const fiber = yield* Effect.fork(runOnce({ worker: "alice", prompt: "loop", ceilingMin: 30 }))
      const box = yield* eventually(running, "the box to start")
      expect(identityFiles(paths)).toHaveLength(1)
      // One deadline: the label the reaper and an adopting daemon read is the moment the runner's timer ends it.
      expect(box.spec.Labels["roster.deadline"]).toBe(String(startedAt + 30 * 60_000))
      yield* TestClock.adjust("29 minutes")
      expect(box.state).toBe("running")
      yield* TestClock.adjust("1 minute")
      const outcome = yield* Fiber.join(fiber)
      expect(outcome.endedBy).toBe("ceiling")
      const kills = yield* (yield* DockerFake).callsOf("containerKill")
      expect(kills[0]).toEqual({ id: box.id, signal: undefined })
      expect(box.state).toBe("removed")
      expect(identityFiles(paths)).toEqual([])
      const record = yield* (yield* RunLog).read("alice", outcome.runId)
      expect(record?.ended_by).toBe("ceiling")
    }).pipe(Effect.provide(layer))
  })

  it.effect("on interrupt kills the box, removes the token and records ended_by signal", () => {
    const { layer, paths } = setup({ docker: { script: () => ({ hang: true }) } })
    return Effect.gen(function*() {
      const fiber = yield* Effect.fork(runOnce({ worker: "alice", prompt: "loop" }))
      const box = yield* eventually(running, "the box to start")
      const exit = yield* Fiber.interrupt(fiber)
      expect(Exit.isInterrupted(exit)).toBe(true)
      expect(box.state).toBe("removed")
      expect(yield* (yield* DockerFake).callsOf("containerKill")).toHaveLength(1)
      expect(identityFiles(paths)).toEqual([])
      const runId = box.spec.Labels["roster.run-id"] ?? ""
      const record = yield* (yield* RunLog).read("alice", runId)
      expect(record?.ended_by).toBe("signal")
      expect(record?.exit_code).toBeNull()
    }).pipe(Effect.provide(layer))
  })

  it.effect("validates before anything is written or any Docker call", () => {
    const { layer, paths } = setup()
    return Effect.gen(function*() {
      for (const bad of [
        { worker: "Alice", prompt: "x" },
        { worker: "../etc", prompt: "x" },
        { worker: "alice", prompt: "   " },
        { worker: "alice", prompt: "x", ceilingMin: -1 },
        { worker: "alice", prompt: "x", ceilingMin: Number.NaN },
        { worker: "alice", prompt: "x", ceilingMin: Number.POSITIVE_INFINITY },
        { worker: "alice", prompt: "x", ceilingMin: 0 },
        { worker: "bob", prompt: "x" }
      ]) {
        const exit = yield* Effect.exit(runOnce(bad))
        expect(Exit.isFailure(exit), JSON.stringify(bad)).toBe(true)
      }
      expect(yield* (yield* DockerFake).callsOf("containerCreate")).toEqual([])
      expect(yield* (yield* DockerFake).callsOf("networkInspect")).toEqual([])
      expect(fs.existsSync(layout(paths).runsDir)).toBe(false)
    }).pipe(Effect.provide(layer))
  })

  it.effect("a huge ceiling is refused with the bound before anything is made, never thrown; the longest one runs", () => {
    const { layer } = setup({ docker: { script: () => ({ exitCode: 0 }) } })
    return Effect.gen(function*() {
      const exit = yield* Effect.exit(runOnce({ worker: "alice", prompt: "x", ceilingMin: 1e300 }))
      expect(String(Exit.isFailure(exit) ? exit.cause : "")).toContain("at most 20160 (14 days)")
      expect(yield* (yield* DockerFake).callsOf("containerCreate")).toEqual([])
      const outcome = yield* runOnce({ worker: "alice", prompt: "x", ceilingMin: 20160 })
      expect(outcome.endedBy).toBe("exit")
    }).pipe(Effect.provide(layer))
  })

  it.effect("no credential anywhere is an error naming roster connection add", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    return Effect.gen(function*() {
      const exit = yield* Effect.exit(runOnce({ worker: "alice", prompt: "x" }))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(String(Exit.isFailure(exit) ? exit.cause : "")).toContain("roster connection add anthropic")
      // A subscription sign-in is named for what makes it; a Codex sign-in is never offered as something `add` makes.
      expect(String(Exit.isFailure(exit) ? exit.cause : "")).toContain("roster connection login anthropic")
      expect(String(Exit.isFailure(exit) ? exit.cause : "")).not.toContain("(or openai-codex)")
      expect(yield* (yield* DockerFake).callsOf("containerCreate")).toEqual([])
    }).pipe(Effect.provide(unitLayer(paths, { env: {} })))
  })

  it.effect("a provisioning failure is recorded in run.json as an error", () => {
    const paths = tempPaths()
    writeFixture({ paths, orgToml: "[engine]\nimage = \"not-built:1\"\n" })
    return Effect.gen(function*() {
      const exit = yield* Effect.exit(runOnce({ worker: "alice", prompt: "x" }))
      expect(Exit.isFailure(exit)).toBe(true)
      const dirs = fs.readdirSync(layout(paths).workerRunsDir("alice"))
      const record = JSON.parse(fs.readFileSync(path.join(layout(paths).workerRunsDir("alice"), dirs[0] ?? "", "run.json"), "utf8"))
      expect(record.ended_by).toBe("error")
      expect(record.error).toContain("roster box build")
    }).pipe(Effect.provide(unitLayer(paths)))
  })
})

