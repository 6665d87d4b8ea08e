import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Ref } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { runOnce } from "../../src/box/runOnce.js"
import { RuntimeMissing } from "../../src/box/docker/runtime.js"
import { registerRunsc } from "../../src/box/docker/runtimeHost.js"
import { layout } from "../../src/config/Paths.js"
import { DockerFake } from "../../src/docker/DockerTest.js"
import { ReportLog } from "../../src/report/Reporter.js"
import { RunLog } from "../../src/run/RunLog.js"
import { tempPaths, unitLayer, writeFixture } from "../support/harness.js"

const created = Effect.flatMap(DockerFake, (f) => f.callsOf("containerCreate"))
const notes = Effect.flatMap(ReportLog, Ref.get).pipe(
  Effect.map((rs) => rs.flatMap((r) => (r._tag === "Notice" && r.text.includes("runc") ? [r.text] : [])))
)

const deployment = (runtime: string | undefined) => {
  const paths = tempPaths()
  writeFixture({ paths, orgToml: runtime ? `[box]\nruntime = "${runtime}"\n` : "" })
  return paths
}

describe("[box] runtime: the kernel a box's syscalls reach", () => {
  it.effect("auto takes gVisor (runsc) when the engine has it registered, and the record names it", () => {
    const paths = deployment(undefined)
    return Effect.gen(function*() {
      const outcome = yield* runOnce({ worker: "alice", prompt: "hi" })
      const [spec] = yield* created
      expect(spec?.HostConfig.Runtime).toBe("runsc")
      expect((yield* (yield* RunLog).read("alice", outcome.runId))?.runtime).toBe("runsc")
      expect(yield* notes).toEqual([])
    }).pipe(Effect.provide(unitLayer(paths, { docker: { runtimes: ["runc", "runsc"] } })))
  })

  it.effect("auto falls back to runc without runsc, with a note saying how to add it, once a day", () => {
    const paths = deployment("auto")
    return Effect.gen(function*() {
      const first = yield* runOnce({ worker: "alice", prompt: "hi" })
      yield* runOnce({ worker: "alice", prompt: "again" })
      expect((yield* created).map((s) => s.HostConfig.Runtime)).toEqual(["runc", "runc"])
      expect((yield* (yield* RunLog).read("alice", first.runId))?.runtime).toBe("runc")
      const said = yield* notes
      expect(said).toHaveLength(1)
      expect(said[0]).toContain("apt-get install runsc")
      expect(said[0]).toContain(`"runsc":{"path":"/usr/bin/runsc","runtimeArgs":["--network=host"]}`)
      expect(said[0]).toContain("roster doctor --fix")
      expect(fs.existsSync(layout(paths).runtimeNoted)).toBe(true)
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.effect("runsc asked for but not registered: the run fails before any box, naming the fix", () => {
    const paths = deployment("runsc")
    return Effect.gen(function*() {
      const exit = yield* Effect.exit(runOnce({ worker: "alice", prompt: "hi" }))
      expect(Exit.isFailure(exit)).toBe(true)
      const error = Exit.isFailure(exit) ? exit.cause.toString() : ""
      expect(error).toContain("RuntimeMissing")
      expect(new RuntimeMissing({ registered: ["runc"] }).message).toMatch(/no runtime named runsc \(it has: runc\).*roster doctor --fix.*runtime = "auto"/)
      expect(yield* created).toEqual([])
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.effect("runc asked for: runc even where runsc is registered, and the engine is not asked", () => {
    const paths = deployment("runc")
    return Effect.gen(function*() {
      yield* runOnce({ worker: "alice", prompt: "hi" })
      expect((yield* created).map((s) => s.HostConfig.Runtime)).toEqual(["runc"])
      expect(yield* (yield* DockerFake).callsOf("runtimes")).toEqual([])
    }).pipe(Effect.provide(unitLayer(paths, { docker: { runtimes: ["runc", "runsc"] } })))
  })
})

describe("registering gVisor with the engine (roster doctor --fix)", () => {
  const files = () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "roster-daemonjson-"))
    return { daemonJson: path.join(dir, "daemon.json"), pidFile: path.join(dir, "docker.pid") }
  }
  // Where runsc is on PATH (ensure-host installs it) and this is root, as --fix needs.
  const env = { PATH: process.env.PATH ?? "" }

  it.effect("adds runsc to daemon.json, keeping every other setting and runtime, and signals dockerd to reload", () => {
    const f = files()
    fs.writeFileSync(f.daemonJson, JSON.stringify({ "log-level": "warn", runtimes: { crun: { path: "/usr/bin/crun" } } }))
    const dockerd = spawn("sleep", ["30"])
    fs.writeFileSync(f.pidFile, `${dockerd.pid}\n`)
    const signalled = new Promise<NodeJS.Signals | null>((resolve) => dockerd.once("exit", (_, signal) => resolve(signal)))
    const paths = deployment(undefined)
    return Effect.gen(function*() {
      const said = yield* registerRunsc(f)
      expect(said).toMatch(/^registered gVisor: .*daemon\.json has runtime runsc \(\/\S+\/runsc\), dockerd reloaded$/)
      const written = JSON.parse(fs.readFileSync(f.daemonJson, "utf8"))
      expect(written["log-level"]).toBe("warn")
      expect(written.runtimes.crun).toEqual({ path: "/usr/bin/crun" })
      expect(written.runtimes.runsc).toEqual({ path: expect.stringMatching(/\/runsc$/), runtimeArgs: ["--network=host"] })
      expect(yield* Effect.promise(() => signalled)).toBe("SIGHUP")
    }).pipe(Effect.provide(unitLayer(paths, { env, docker: { runtimes: ["runc", "runsc"] } })))
  })

  it.effect("a daemon.json that is not a JSON object is left alone, with what to do", () => {
    const f = files()
    fs.writeFileSync(f.daemonJson, "{ not json")
    const paths = deployment(undefined)
    return Effect.gen(function*() {
      const failed = yield* Effect.flip(registerRunsc(f))
      expect(failed.message).toContain("it is not a JSON object; fix it by hand, then run roster doctor --fix again")
      expect(fs.readFileSync(f.daemonJson, "utf8")).toBe("{ not json")
    }).pipe(Effect.provide(unitLayer(paths, { env })))
  })

  it.effect("a daemon.json that cannot be read is never written over (its other settings would be lost), with what to do (issue 64.7)", () => {
    const f = files()
    // A folder where the file should be: it cannot be read as one.
    fs.mkdirSync(f.daemonJson)
    const paths = deployment(undefined)
    return Effect.gen(function*() {
      const failed = yield* Effect.flip(registerRunsc(f))
      expect(failed.message).toMatch(/it could not be read \(.*\); fix its permissions, then run roster doctor --fix again/)
      expect(fs.statSync(f.daemonJson).isDirectory()).toBe(true)
    }).pipe(Effect.provide(unitLayer(paths, { env })))
  })
})
