import type { CommandExecutor, FileSystem, Path, Terminal } from "@effect/platform"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Effect, Layer } from "effect"
import { Firewall } from "./box/Firewall.js"
import { ImageStore } from "./box/docker/ImageStore.js"
import { OrgConfig } from "./config/OrgConfig.js"
import { type HostFiles, Paths } from "./config/Paths.js"
import type { Docker } from "./docker/Docker.js"
import { DockerLive } from "./docker/DockerLive.js"
import { BoxBackend } from "./backend/BoxBackend.js"
import { DockerBackend } from "./box/docker/dockerBackend.js"
import { Files } from "./fs/Files.js"
import { Audit } from "./gateway/base/Audit.js"
import { Dialer } from "./gateway/base/Dialer.js"
import { GatewayProbe } from "./contract/GatewayProbe.js"
import { LiveRuns } from "./gateway/base/LiveRuns.js"
import { HostGit } from "./knowledge/HostGit.js"
import { Reporter } from "./report/Reporter.js"
import { Hurry } from "./run/Hurry.js"
import { RunFence } from "./run/RunFence.js"
import { RunIndex } from "./run/RunIndex.js"
import { AuditIndex } from "./run/AuditIndex.js"
import { TaintLog } from "./run/TaintLog.js"
import { fleetTaintLogOnDemand } from "./fleet/taintLog.js"
import { fleetAuditIndexOnDemand } from "./fleet/auditIndex.js"
import { RunLog } from "./run/RunLog.js"
import { FleetSqlOnDemand } from "./fleet/firstUse.js"
import { fleetRunIndexOnDemand } from "./fleet/runIndex.js"
import { MemoryStore } from "./memory/MemoryStore.js"
import { fleetMemoryStoreOnDemand } from "./fleet/memoryStore.js"
import { fleetTaskStoreOnDemand } from "./fleet/taskStoreOnDemand.js"
import { TaskStore } from "./task/TaskStore.js"
import { Runner } from "./runner/Runner.js"
import { Vault } from "./vault/Vault.js"

/** The platform roster runs on: Node's file system, paths, processes and terminal. */
export type Platform = FileSystem.FileSystem | Path.Path | CommandExecutor.CommandExecutor | Terminal.Terminal

/** The parts below the box backend: the platform, the engine, the deployment and the host's tools. */
export type RosterFoundation = Platform | Files | Paths | Docker | GatewayProbe | Firewall | Dialer | Hurry | HostGit | Reporter

/** What roster's own services are built over: the foundation and the box backend on it. */
export type RosterBase = RosterFoundation | BoxBackend

/** Roster's own services, over {@link RosterBase}. */
export type RosterServices = OrgConfig | RunLog | RunIndex | AuditIndex | TaintLog | ImageStore | Vault | LiveRuns | Audit | TaskStore | MemoryStore | RunFence

/** Every service roster provides: the base, its services, and the Runner that starts every run over them. */
export type Roster = RosterBase | RosterServices | Runner

/**
 * The parts of roster, each replaceable by one layer: an engine (another box backend, the Docker
 * test layer), a deployment's paths, a reporter, a task store on another database. A part left
 * out is the live one. Each service captures the parts below it when it is built, so the part
 * given here is the one every service uses.
 */
export interface RosterParts {
  readonly platform?: Layer.Layer<Platform>
  readonly files?: Layer.Layer<Files>
  readonly paths?: Layer.Layer<Paths>
  readonly docker?: Layer.Layer<Docker>
  readonly probe?: Layer.Layer<GatewayProbe>
  readonly firewall?: Layer.Layer<Firewall>
  readonly dialer?: Layer.Layer<Dialer>
  readonly hurry?: Layer.Layer<Hurry>
  readonly git?: Layer.Layer<HostGit>
  readonly reporter?: Layer.Layer<Reporter>
  /** Where boxes run (the Docker engine's backend over `docker` by default). */
  readonly backend?: Layer.Layer<BoxBackend, never, RosterFoundation>
  readonly orgConfig?: Layer.Layer<OrgConfig, never, RosterBase>
  readonly runLog?: Layer.Layer<RunLog, never, RosterBase>
  readonly runIndex?: Layer.Layer<RunIndex, never, RosterBase>
  readonly auditIndex?: Layer.Layer<AuditIndex, never, RosterBase>
  readonly taintLog?: Layer.Layer<TaintLog, never, RosterBase>
  readonly imageStore?: Layer.Layer<ImageStore, never, RosterBase>
  readonly vault?: Layer.Layer<Vault, never, RosterBase>
  readonly liveRuns?: Layer.Layer<LiveRuns, never, RosterBase>
  readonly audit?: Layer.Layer<Audit, never, RosterBase>
  readonly taskStore?: Layer.Layer<TaskStore, never, RosterBase>
  readonly memoryStore?: Layer.Layer<MemoryStore, never, RosterBase>
  readonly runFence?: Layer.Layer<RunFence, never, RosterBase>
  /** How runs start (`Runner.layerTest` for a test of what a surface does with a run). */
  readonly runner?: Layer.Layer<Runner, never, RosterBase | RosterServices>
}

/** What the given parts provide besides their service (a test layer's log of calls, say). */
type PartsOut<P> = { readonly [K in keyof P]-?: P[K] extends Layer.Layer<infer A, infer _E, infer _R> | undefined ? A : never }[keyof P]

/**
 * Every service roster needs from `parts`, the live one for each part not given (and whatever
 * else a given part provides, such as the Docker test layer's `DockerFake`). Built once and
 * provided at the edge.
 */
export const makeRosterLive = <const P extends RosterParts = Record<never, never>>(parts: P = {} as P): Layer.Layer<Roster | PartsOut<P>> => {
  const base = Layer.mergeAll(
    parts.platform ?? NodeContext.layer,
    parts.files ?? Files.layer,
    parts.paths ?? Paths.layer,
    parts.docker ?? DockerLive,
    parts.probe ?? GatewayProbe.layer,
    parts.firewall ?? Firewall.layer,
    parts.dialer ?? Dialer.layer,
    parts.hurry ?? Hurry.layerNever,
    parts.git ?? HostGit.layer,
    parts.reporter ?? Reporter.layerLog
  ).pipe((foundation) => Layer.provideMerge(parts.backend ?? DockerBackend, foundation))
  const orgConfig = parts.orgConfig ?? OrgConfig.layer
  const vault = parts.vault ?? Vault.layer
  // One connection to a fleet's database, made on first use, for every store that needs it.
  const fleetSql = FleetSqlOnDemand.layer.pipe(Layer.provide(Layer.merge(orgConfig, vault)))
  const runIndex = parts.runIndex ?? runIndexLive.pipe(Layer.provide(fleetSql))
  const auditIndex = parts.auditIndex ?? auditIndexLive.pipe(Layer.provide(fleetSql))
  const taintLog = parts.taintLog ?? taintLogLive.pipe(Layer.provide(fleetSql))
  const services = Layer.mergeAll(
    orgConfig,
    runIndex,
    auditIndex,
    taintLog,
    parts.runLog ?? RunLog.layerIndexed.pipe(Layer.provide(Layer.merge(runIndex, taintLog))),
    parts.imageStore ?? ImageStore.layer,
    vault,
    parts.liveRuns ?? LiveRuns.layer,
    parts.audit ?? auditLive.pipe(Layer.provide(auditIndex)),
    parts.taskStore ?? taskStoreLive.pipe(Layer.provide(fleetSql)),
    parts.memoryStore ?? memoryStoreLive.pipe(Layer.provide(fleetSql)),
    parts.runFence ?? RunFence.layerNone
  )
  // The parts' own extras are in the built context; the types above say which.
  return (parts.runner ?? Runner.layer).pipe(Layer.provideMerge(services), Layer.provideMerge(base)) as Layer.Layer<Roster | PartsOut<P>>
}

/**
 * Worker memory where this machine keeps it: its files, or under `[cluster]` the fleet's database
 * (connected on first use; the daemon gives its own connection to its services instead).
 */
const memoryStoreLive = Layer.unwrapEffect(Effect.map(Paths, (p): Layer.Layer<MemoryStore, never, HostFiles | Files | FleetSqlOnDemand> =>
  p.fleet ? fleetMemoryStoreOnDemand : MemoryStore.layer))

/** Tasks where this machine keeps them: its files, or under `[cluster]` the fleet's queue (connected on first use; the daemon uses its own). */
const taskStoreLive = Layer.unwrapEffect(Effect.map(Paths, (p): Layer.Layer<TaskStore, never, HostFiles | Files | FleetSqlOnDemand> =>
  p.fleet ? fleetTaskStoreOnDemand : TaskStore.layer))

/** Which runs there are: listing the folders, or under `[cluster]` the fleet's run index (connected on first use; the daemon uses its own). */
const runIndexLive = Layer.unwrapEffect(Effect.map(Paths, (p): Layer.Layer<RunIndex, never, FleetSqlOnDemand> =>
  p.fleet ? fleetRunIndexOnDemand : RunIndex.layerNone))

/** Where each run's requests begin in the audit log: none on a machine on its own, else the fleet's table (connected on first use). */
const auditIndexLive = Layer.unwrapEffect(Effect.map(Paths, (p): Layer.Layer<AuditIndex, never, FleetSqlOnDemand> =>
  p.fleet ? fleetAuditIndexOnDemand : AuditIndex.layerNone))

/** Taints and untaints every node sees: none on a machine on its own (its run folders hold them), else the fleet's table (connected on first use). */
const taintLogLive = Layer.unwrapEffect(Effect.map(Paths, (p): Layer.Layer<TaintLog, never, FleetSqlOnDemand> =>
  p.fleet ? fleetTaintLogOnDemand : TaintLog.layerNone))

/** The gateway's audit log: on a fleet node it also says where each run's lines begin (the daemon gives its own connection). */
const auditLive = Layer.unwrapEffect(Effect.map(Paths, (p): Layer.Layer<Audit, never, HostFiles | Files | AuditIndex> =>
  p.fleet ? Audit.layerIndexed : Audit.layer))

/** Every live service roster needs: {@link makeRosterLive} with every part the live one. */
export const RosterLive = makeRosterLive()
