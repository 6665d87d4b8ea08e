import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Exit, TestClock } from "effect"
import * as fs from "node:fs"
import { ConfigError, decodeToml } from "../../src/config/decode.js"
import { isWorkerName } from "../../src/config/names.js"
import { OrgConfig } from "../../src/config/OrgConfig.js"
import { layout, Paths } from "../../src/config/Paths.js"
import { OrgSchema, WorkerSchema } from "../../src/config/schema.js"
import { ORG_TEMPLATE, orgTemplate } from "../../src/config/template.js"
import { tempPaths, unitLayer } from "../support/harness.js"
import { VERSION } from "../../src/contract/version.js"

const problems = (text: string) => {
  const r = decodeToml(OrgSchema, "/x/org.toml", text)
  if (Either.isRight(r)) throw new Error("expected a config error")
  return r.left
}

describe("org.toml", () => {
  it("the template roster init writes decodes to the safe defaults", () => {
    const org = Either.getOrThrow(decodeToml(OrgSchema, "org.toml", ORG_TEMPLATE))
    expect(org.engine.image).toBe("roster-box:1")
    expect(org.box).toMatchObject({ pids_limit: 512, egress_lockdown: false, ceiling_min: 30, session_ceiling_min: 240, turn_ceiling_min: 30, idle_secs: 600 })
    expect(org.gateway.port).toBe(7300)
    expect(org.allow).toEqual([])
    expect(org.grant).toEqual([])
  })

  it("roster init as root writes egress_lockdown on, with its reason", () => {
    const org = Either.getOrThrow(decodeToml(OrgSchema, "org.toml", orgTemplate({ root: true })))
    expect(org.box.egress_lockdown).toBe(true)
    expect(orgTemplate({ root: true })).toMatch(/roster init ran as root/)
    expect(Either.getOrThrow(decodeToml(OrgSchema, "org.toml", orgTemplate({ root: false }))).box.egress_lockdown).toBe(false)
  })

  it("a default box has a memory limit and a /tmp below it; a /tmp as big as memory is refused with the fix", () => {
    const org = Either.getOrThrow(decodeToml(OrgSchema, "org.toml", ""))
    expect(org.box).toMatchObject({ memory: "4g", tmp_size: "1g" })
    const e = problems(["[box]", "memory = \"1g\"", "tmp_size = \"2g\""].join("\n"))
    expect(e.message).toMatch(/box\.tmp_size: tmp_size \(2g\) must be below memory \(1g\).*lower \[box\] tmp_size or raise \[box\] memory/)
  })

  it("an empty file is the defaults", () => {
    const org = Either.getOrThrow(decodeToml(OrgSchema, "org.toml", ""))
    expect(org.box.ceiling_min).toBe(30)
  })

  it("reports every problem at once, each with its key", () => {
    const e = problems([
      "[box]",
      "pids_limit = -1",
      "ceiling_min = 0",
      "egress_lockdwn = true",
      "memory = \"lots\"",
      "[gateway]",
      "port = 70000",
      "[[allow]]",
      "hosts = [\"https://x.test/path\"]",
      "scope = [\"everyone\"]"
    ].join("\n"))
    const keys = e.problems.map((p) => p.key)
    expect(keys).toEqual(expect.arrayContaining([
      "box.pids_limit", "box.ceiling_min", "box.egress_lockdwn", "box.memory", "gateway.port", "allow[0].hosts[0]", "allow[0].scope[0]"
    ]))
    expect(e.message).toContain("/x/org.toml")
    expect(e.message).toContain("7 problems")
    expect(e.problems.find((p) => p.key === "box.egress_lockdwn")?.problem).toContain("unknown key")
  })

  it("reports wrong types and missing required keys of a rule", () => {
    const e = problems("[box]\negress_lockdown = \"yes\"\n[[grant]]\nname = \"g\"\nhosts = [\"api.test\"]\nscope = [\"org/*\"]\n")
    expect(e.problems.map((p) => p.key)).toEqual(expect.arrayContaining(["box.egress_lockdown", "grant[0].credential"]))
  })

  it("reports a TOML syntax error with the file", () => {
    const e = problems("[box\npids_limit = 1")
    expect(e.problems[0]?.problem).toContain("not valid TOML")
    expect(e.message).toContain("/x/org.toml")
  })

  it("reports a mount without an absolute path and an unknown kind", () => {
    const e = problems("[[mount]]\nname = \"n\"\npath = \"relative/dir\"\nkind = \"disk\"\n")
    expect(e.problems.map((p) => p.key)).toEqual(expect.arrayContaining(["mount[0].path", "mount[0].kind"]))
  })

  it("[cluster]: absent is one machine; the template's commented block decodes with its defaults", () => {
    expect(Either.getOrThrow(decodeToml(OrgSchema, "org.toml", ORG_TEMPLATE)).cluster).toBeUndefined()
    const block = ORG_TEMPLATE.slice(ORG_TEMPLATE.indexOf("# [cluster]"))
      .split("\n").filter((l) => l.startsWith("# ")).map((l) => l.slice(2)).join("\n")
    const org = Either.getOrThrow(decodeToml(OrgSchema, "org.toml", block))
    expect(org.cluster).toEqual({
      database: "postgres://roster@db.example.test:5432/roster",
      node: "machine-1",
      shared_data: "/mnt/roster",
      listen: "eth0:7310",
      advertise: "10.0.0.5:7310",
      node_timeout_s: 30,
      on_node_loss: "retry",
      lock_timeout_s: 3,
      statement_timeout_s: 10,
      idle_transaction_timeout_s: 10
    })
    const least = Either.getOrThrow(decodeToml(OrgSchema, "org.toml", "[cluster]\ndatabase = \"postgres://r@db.test/r\"\nshared_data = \"/srv/r\"\n"))
    expect(least.cluster).toMatchObject({ node_timeout_s: 30, on_node_loss: "retry" })
    expect(least.cluster?.node).toBeUndefined()
  })

  it("[cluster]: a password in the URL is refused with where it goes; bad keys each named", () => {
    const e = problems([
      "[cluster]",
      "database = \"postgres://roster:hunter2@db.test/roster\"",
      "shared_data = \"shared\"",
      "listen = \"0.0.0.0\"",
      "node = \"has space\"",
      "on_node_loss = \"ignore\"",
      "node_timeout_s = 1"
    ].join("\n"))
    const by = new Map(e.problems.map((p) => [p.key, p.problem]))
    expect(by.get("cluster.database")).toMatch(/holds a password.*roster connection add postgres.*PGPASSWORD/)
    expect(e.message).not.toContain("hunter2")
    expect(by.get("cluster.shared_data")).toMatch(/absolute/)
    expect(by.get("cluster.listen")).toMatch(/host:port/)
    expect(by.has("cluster.node")).toBe(true)
    expect(by.has("cluster.on_node_loss")).toBe(true)
    expect(by.has("cluster.node_timeout_s")).toBe(true)
    expect(problems("[cluster]\ndatabase = \"mysql://db.test/r\"\nshared_data = \"/s\"\n").problems[0]?.problem).toMatch(/postgres:\/\//)
    expect(problems("[cluster]\nshared_data = \"/s\"\n").problems.map((p) => p.key)).toEqual(["cluster.database"])
  })

  it("worker.toml: model, thinking, snapshots kept", () => {
    const w = Either.getOrThrow(decodeToml(WorkerSchema, "worker.toml", "model = \"anthropic/x\"\nthinking = \"high\"\n[store]\nsnapshots = 2\n"))
    expect(w).toEqual({ model: "anthropic/x", thinking: "high", store: { snapshots: 2 } })
    const bad = decodeToml(WorkerSchema, "worker.toml", "thinking = \"extreme\"\n")
    expect(Either.isLeft(bad)).toBe(true)
  })

  it.effect("a missing org.toml names roster init", () => {
    const paths = tempPaths()
    return Effect.gen(function*() {
      const exit = yield* Effect.exit((yield* OrgConfig).snapshot)
      expect(Exit.isFailure(exit)).toBe(true)
      const e = Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined
      expect(e).toBeInstanceOf(ConfigError)
      expect(e?.message).toContain("roster init")
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.effect("the snapshot follows edits to the file (within half a second)", () => {
    const paths = tempPaths()
    fs.mkdirSync(paths.config, { recursive: true })
    const file = layout(paths).orgToml
    fs.writeFileSync(file, "[box]\nceiling_min = 5\n")
    return Effect.gen(function*() {
      const config = yield* OrgConfig
      expect((yield* config.snapshot).box.ceiling_min).toBe(5)
      fs.writeFileSync(file, "[box]\nceiling_min = 7\n")
      yield* TestClock.adjust("500 millis")
      expect((yield* config.snapshot).box.ceiling_min).toBe(7)
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  const snapshotWith = (paths: ReturnType<typeof tempPaths>, env: Record<string, string>) =>
    Effect.flatMap(OrgConfig, (c) => c.snapshot).pipe(Effect.provide(unitLayer(paths, { env })))

  it.effect("ROSTER_GATEWAY_PORT sets this node's [gateway] port over org.toml's; a bad one is named with the fix", () => {
    const paths = tempPaths()
    fs.mkdirSync(paths.config, { recursive: true })
    fs.writeFileSync(layout(paths).orgToml, "[gateway]\nport = 7300\n")
    return Effect.gen(function*() {
      expect((yield* snapshotWith(paths, {})).gateway.port).toBe(7300)
      expect((yield* snapshotWith(paths, { ROSTER_GATEWAY_PORT: "7411" })).gateway.port).toBe(7411)
      const bad = yield* Effect.flip(snapshotWith(paths, { ROSTER_GATEWAY_PORT: "80000" }))
      expect(bad.message).toContain("ROSTER_GATEWAY_PORT: 80000 is not a port")
      expect(bad.message).toContain("unset it to use [gateway] port")
    })
  })
})

describe("the version", () => {
  it("is one: package.json's (what roster --version prints without loading the program) is the program's", () => {
    const pkg = JSON.parse(fs.readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }
    expect(pkg.version).toBe(VERSION)
  })
})

describe("names and paths", () => {
  it("worker names follow ^[a-z][a-z0-9-]{0,31}$", () => {
    for (const ok of ["a", "alice", "bob-2", "a".repeat(32)]) expect(isWorkerName(ok)).toBe(true)
    for (const bad of ["", "Alice", "1bob", "-x", "a".repeat(33), "../x", "a/b", "a b", "a\n"]) expect(isWorkerName(bad)).toBe(false)
  })

  it("ROSTER_HOME puts the three roots under one folder; otherwise XDG", () => {
    expect(Paths.fromEnv({ ROSTER_HOME: "/x", HOME: "/home/u" })).toMatchObject({ config: "/x/config", data: "/x/data", state: "/x/state" })
    expect(Paths.fromEnv({ HOME: "/home/u" })).toMatchObject({
      config: "/home/u/.config/roster", data: "/home/u/.local/share/roster", state: "/home/u/.local/state/roster"
    })
    expect(Paths.fromEnv({ HOME: "/home/u", XDG_CONFIG_HOME: "/cfg" }).config).toBe("/cfg/roster")
  })
})
