import { expect } from "@effect/vitest"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Effect, Layer } from "effect"
import { DockerBackend } from "../../src/box/docker/dockerBackend.js"
import { Firewall } from "../../src/box/Firewall.js"
import { Paths } from "../../src/config/Paths.js"
import { GatewayProbe } from "../../src/contract/GatewayProbe.js"
import type { Docker } from "../../src/docker/Docker.js"
import { DockerFake, makeDockerTest } from "../../src/docker/DockerTest.js"
import { Files } from "../../src/fs/Files.js"
import { HostGit } from "../../src/knowledge/HostGit.js"
import { Reporter } from "../../src/report/Reporter.js"
import * as fs from "node:fs"
import { type RosterPaths, layout } from "../../src/config/Paths.js"
import { rosterTestServices, type RosterTestOptions, tempDeployment } from "../../src/testing.js"

export const tempPaths = (): RosterPaths => tempDeployment("roster-unit-")

export interface Fixture {
  readonly paths: RosterPaths
  readonly orgToml?: string
  readonly workers?: ReadonlyArray<string>
  readonly gateway?: { readonly port: number; readonly addrs: ReadonlyArray<string> } | null
}

/** A deployment on disk: org.toml, workers, a recorded gateway and a CA file, as `roster init` + `server start` leave them. */
export const writeFixture = (f: Fixture) => {
  const files = layout(f.paths)
  fs.mkdirSync(f.paths.config, { recursive: true })
  fs.writeFileSync(files.orgToml, f.orgToml ?? "")
  for (const w of f.workers ?? ["alice"]) {
    fs.mkdirSync(files.workerDir(w), { recursive: true })
    fs.writeFileSync(files.identityMd(w), `# ${w}\nYou are ${w}.\n`)
  }
  if (f.gateway !== null) {
    const g = f.gateway ?? { port: 7300, addrs: ["127.0.0.1", "172.30.0.1"] }
    fs.mkdirSync(f.paths.state, { recursive: true })
    fs.writeFileSync(files.gatewayJson, JSON.stringify({
      ...g, pid: process.pid, config_root: f.paths.config, version: "test", started_at: new Date().toISOString()
    }))
  }
  fs.mkdirSync(files.caDir, { recursive: true })
  fs.writeFileSync(files.caCert, "-----BEGIN CERTIFICATE-----\nZmFrZQ==\n-----END CERTIFICATE-----\n")
}

export type UnitOptions = RosterTestOptions & { readonly vault?: Record<string, Record<string, unknown>> }

/** The live services over a temp deployment, with the Docker fake, a scripted gateway probe and a recording firewall. */
export const unitLayer = (paths: RosterPaths, o: UnitOptions = {}) =>
  rosterTestServices(paths, { ...o, env: o.env ?? { ANTHROPIC_API_KEY: "sk-ant-real-key" } })

/** Real-time polling (the TestClock does not move on its own): waits until `check` holds. */
export const eventually = <A, E, R>(check: Effect.Effect<A | undefined | false, E, R>, what = "condition", ms = 5000) =>
  Effect.gen(function*() {
    const deadline = Date.now() + ms
    for (;;) {
      const v = yield* check
      if (v) return v
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out waiting for ${what}`))
      yield* Effect.promise(() => new Promise((r) => setTimeout(r, 5)))
    }
  })


/**
 * Polls (real time) until `ok` holds, then asserts it with the last value seen, so a test fails by
 * assertion (saying what it last saw) rather than by its own timeout.
 */
export const until = <A>(read: Effect.Effect<A>, ok: (a: A) => boolean, what: string, ms = 20_000) =>
  Effect.gen(function*() {
    const deadline = Date.now() + ms
    let last = yield* read
    while (!ok(last) && Date.now() < deadline) {
      yield* Effect.sleep("20 millis")
      last = yield* read
    }
    expect(ok(last), `${what}; last seen: ${JSON.stringify(last)}`).toBe(true)
    return last
  })

/**
 * The engine as a test that builds its own services gives it: the platform and files at `paths`,
 * the Docker fake (or `docker`), and the box backend over it (its lockdown's firewall and gateway
 * probe stand-ins answering as this deployment).
 */
export const testEngine = (paths: RosterPaths, docker: Layer.Layer<Docker | DockerFake> = makeDockerTest()) => {
  const base = Layer.mergeAll(NodeContext.layer, Files.layer, HostGit.layer, Paths.layerAt(paths), docker)
  const aside = Layer.mergeAll(
    Firewall.layerTest(),
    GatewayProbe.layerTest(() => ({ ok: true, config_root: paths.config, version: "test" })),
    Reporter.layerCollect
  )
  return DockerBackend.pipe(Layer.provideMerge(base), Layer.provide(aside))
}
