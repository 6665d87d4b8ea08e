/**
 * `roster/testing`: roster with a fake engine, for tests of programs that embed it (and for
 * roster's own). {@link RosterTest} is every service roster needs over a temporary deployment,
 * with the Docker test layer, a firewall that records, a gateway probe that answers as that
 * deployment, and a Reporter that keeps what was said.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { runOnce } from "roster"
 * import { RosterTest } from "roster/testing"
 *
 * const outcome = await Effect.runPromise(
 *   runOnce({ worker: "alice", prompt: "hello", ceilingMin: 1 }).pipe(Effect.provide(RosterTest()))
 * )
 * ```
 * @module
 */
import { FileSystem } from "@effect/platform"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Clock, ConfigProvider, type Deferred, Effect, Layer } from "effect"
import * as path from "node:path"
import { Firewall, type FirewallTool } from "./box/Firewall.js"
import { Paths, type RosterPaths } from "./config/Paths.js"
import { makeRosterLive } from "./RosterLive.js"
import { GatewayProbe, type Health } from "./contract/GatewayProbe.js"
import { writeGatewayState } from "./contract/gatewayState.js"
import { initDeployment } from "./deployment/init.js"
import { makeTempDirSync } from "./fs/tempDir.js"
import { type DockerFakeOptions, makeDockerTest } from "./docker/DockerTest.js"
import { HostGit } from "./knowledge/HostGit.js"
import { Reporter } from "./report/Reporter.js"
import { Hurry } from "./run/Hurry.js"
import { Vault, type VaultEntry } from "./vault/Vault.js"
import { Runner, type RunnerScript } from "./runner/Runner.js"

export {
  type ContainerScript,
  DockerFake,
  type DockerFakeOptions,
  type FakeCall,
  type FakeCallArgs,
  type FakeContainer,
  type FakeOp,
  fakeImage,
  lockedNetwork,
  makeDockerTest
} from "./docker/DockerTest.js"
export { FirewallLog } from "./box/Firewall.js"
export { GitLog } from "./knowledge/HostGit.js"
export { ReportLog } from "./report/Reporter.js"
export { echoSession, exitedOk, type RunnerCall, RunnerCalls, type RunnerScript, type WarmAsk, WarmAsks } from "./runner/Runner.js"

/** How a test deployment behaves. Every field is optional. */
export interface RosterTestOptions {
  /** The fake engine: scripted boxes, images, networks, failures. */
  readonly docker?: DockerFakeOptions
  /** What the gateway's /healthz answers on a port (default: this deployment's gateway, up). */
  readonly health?: (port: number) => Health | undefined
  /** Whether an iptables call succeeds (default: all do). */
  readonly firewall?: (tool: FirewallTool, args: ReadonlyArray<string>) => boolean
  /** What an iptables listing (-S) prints (default: nothing). */
  readonly firewallListing?: (tool: FirewallTool, args: ReadonlyArray<string>) => string | undefined
  /** The process environment roster's Config sees (default: a stand-in ANTHROPIC_API_KEY, so runs have a model credential). */
  readonly env?: Record<string, string>
  /** Stored connections, kept in memory (default: the deployment's real, empty vault). */
  readonly vault?: Record<string, VaultEntry>
  /** Completing it plays a person's second Ctrl-C (cuts long clean-up short). */
  readonly hurry?: Deferred.Deferred<void>
  /** Replaces some FileSystem calls (to fail or hold them); the rest are the real ones. */
  readonly fs?: (real: FileSystem.FileSystem) => Partial<FileSystem.FileSystem>
  /** Runs that start no box: each as scripted, every call kept in `RunnerCalls` (default: the real Runner, over the fake engine). */
  readonly runner?: RunnerScript
}

/** The stand-in model key a test deployment's environment holds: never a real one, and never in a box (the box gets the sentinel). */
export const TEST_MODEL_KEY = "sk-ant-roster-test-not-a-real-key"

/** Fresh roots under a new temp folder, laid out as `ROSTER_HOME` would lay them (the host user's home inside it). */
export const tempDeployment = (prefix = "roster-test-"): RosterPaths => {
  const root = makeTempDirSync(prefix, "home")
  const home = path.join(root, "home")
  return { ...Paths.fromEnv({ ROSTER_HOME: root, HOME: home }), home }
}

const fileSystem = (override: NonNullable<RosterTestOptions["fs"]>) =>
  Layer.effect(FileSystem.FileSystem, Effect.map(FileSystem.FileSystem, (real) => ({ ...real, ...override(real) }))).pipe(
    Layer.provide(NodeFileSystem.layer)
  )

/**
 * Every service roster needs, over an existing deployment at `paths`, with the fakes of
 * {@link RosterTestOptions}. Nothing is written until something runs.
 */
export const rosterTestServices = (paths: RosterPaths, o: RosterTestOptions = {}) =>
  Layer.mergeAll(
    makeRosterLive({
      // The override's FileSystem is merged last: it is the one every service captures.
      ...(o.fs ? { platform: Layer.mergeAll(NodeContext.layer, fileSystem(o.fs)) } : {}),
      paths: Paths.layerAt(paths),
      docker: makeDockerTest(o.docker),
      probe: GatewayProbe.layerTest(o.health ?? (() => ({ ok: true, config_root: paths.config, version: "test" }))),
      firewall: Firewall.layerTest(o.firewall, o.firewallListing),
      hurry: o.hurry ? Hurry.layerTest(o.hurry) : Hurry.layerNever,
      git: HostGit.layerTest,
      reporter: Reporter.layerCollect,
      ...(o.vault ? { vault: Vault.layerTest(o.vault) } : {}),
      ...(o.runner ? { runner: Runner.layerTest(o.runner) } : {})
    }),
    Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(o.env ?? { ANTHROPIC_API_KEY: TEST_MODEL_KEY }))))
  )

/** The gateway a test deployment has "running": its state file, as `roster server start` leaves it. */
const recordTestGateway = (paths: RosterPaths) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    writeGatewayState({
      port: 7300,
      addrs: ["127.0.0.1", "172.30.0.1"],
      pid: process.pid,
      config_root: paths.config,
      version: "test",
      started_at: new Date(now).toISOString()
    }))

/**
 * A whole test deployment: made with {@link initDeployment} in a fresh temp folder (org.toml,
 * worker `alice`, the CA), its gateway recorded as running, and every service roster needs
 * over it with the fakes of {@link RosterTestOptions}.
 */
export const RosterTest = (options: RosterTestOptions & {
  /** The deployment's roots (default: a fresh temp folder). */
  readonly paths?: RosterPaths
  /** org.toml (default: the image the fake engine has, and the egress lockdown on — the fake firewall accepts it). */
  readonly orgToml?: string
  /** Workers to create besides the first (default: just "alice"). */
  readonly workers?: ReadonlyArray<string>
} = {}) => {
  const paths = options.paths ?? tempDeployment()
  const services = rosterTestServices(paths, options)
  const made = Layer.effectDiscard(Effect.gen(function*() {
    yield* initDeployment({ worker: options.workers?.[0] ?? "alice", orgToml: options.orgToml ?? "[engine]\nimage = \"roster-box:1\"\n[box]\negress_lockdown = true\n" })
    for (const w of (options.workers ?? []).slice(1)) yield* initDeployment({ worker: w })
    yield* recordTestGateway(paths)
  }))
  return Layer.provideMerge(made, services)
}
