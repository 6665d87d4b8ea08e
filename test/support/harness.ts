import { FileSystem } from "@effect/platform"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodePath from "@effect/platform-node/NodePath"
import { HostGit } from "../../src/knowledge/HostGit.js"
import { Reporter } from "../../src/report/Reporter.js"
import { ConfigProvider, type Deferred, Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Firewall, type FirewallTool } from "../../src/box/Firewall.js"
import { ImageStore } from "../../src/box/ImageStore.js"
import { OrgConfig } from "../../src/config/OrgConfig.js"
import { Paths, type RosterPaths, layout } from "../../src/config/Paths.js"
import { type DockerFakeOptions, makeDockerTest } from "../../src/docker/DockerTest.js"
import { GatewayProbe, type Health } from "../../src/contract/GatewayProbe.js"
import { Files } from "../../src/fs/Files.js"
import { Hurry } from "../../src/run/Hurry.js"
import { RunLog } from "../../src/run/RunLog.js"
import { Vault } from "../../src/vault/Vault.js"

export const tempPaths = (): RosterPaths => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "roster-unit-"))
  const home = path.join(root, "home")
  fs.mkdirSync(home, { recursive: true })
  return { ...Paths.fromEnv({ ROSTER_HOME: root, HOME: home }), home }
}

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

export interface UnitOptions {
  readonly docker?: DockerFakeOptions
  readonly health?: (port: number) => Health | undefined
  readonly firewall?: (tool: FirewallTool, args: ReadonlyArray<string>) => boolean
  /** What an iptables listing (-S) prints. */
  readonly firewallListing?: (tool: FirewallTool, args: ReadonlyArray<string>) => string | undefined
  readonly env?: Record<string, string>
  readonly vault?: Record<string, Record<string, unknown>>
  /** Completing it plays a person's second Ctrl-C. */
  readonly hurry?: Deferred.Deferred<void>
  /** Replaces some FileSystem calls (to fail or hold them); the rest are the real ones. */
  readonly fs?: (real: FileSystem.FileSystem) => Partial<FileSystem.FileSystem>
}

const fileSystem = (override: UnitOptions["fs"]) =>
  override
    ? Layer.effect(FileSystem.FileSystem, Effect.map(FileSystem.FileSystem, (real) => ({ ...real, ...override(real) }))).pipe(
      Layer.provide(NodeFileSystem.layer)
    )
    : NodeFileSystem.layer

/** The live services over a temp deployment, with the Docker fake, a scripted gateway probe and a recording firewall. */
export const unitLayer = (paths: RosterPaths, o: UnitOptions = {}) => {
  const base = Layer.mergeAll(
    NodePath.layer,
    fileSystem(o.fs),
    Files.layer,
    o.hurry ? Hurry.layerTest(o.hurry) : Hurry.layerNever,
    Paths.layerAt(paths),
    makeDockerTest(o.docker),
    GatewayProbe.layerTest(o.health ?? (() => ({ ok: true, config_root: paths.config, version: "test" }))),
    Firewall.layerTest(o.firewall, o.firewallListing),
    HostGit.layerTest,
    Reporter.layerCollect
  )
  const vault: Layer.Layer<Vault, never, Layer.Layer.Success<typeof base>> = o.vault ? Vault.layerTest(o.vault) : Vault.layer
  const services = Layer.mergeAll(OrgConfig.layer, RunLog.layer, ImageStore.layer, vault).pipe(Layer.provideMerge(base))
  return Layer.mergeAll(
    services,
    Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(o.env ?? { ANTHROPIC_API_KEY: "sk-ant-real-key" }))))
  )
}

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

