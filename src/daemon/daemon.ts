import { sweepLoop } from "../supervisor/storeCare.js"
import { FileSystem } from "@effect/platform"
import { Clock, Config, Context, Effect, Layer, Option } from "effect"
import { gatewayAddresses, ListenRefused } from "../box/docker/listen.js"
import { notice, report } from "../report/Reporter.js"
import { logDefects } from "../report/defects.js"
import { ImageStore, isRegistryRef } from "../box/docker/ImageStore.js"
import { removeEgressLockdown } from "../box/docker/egressChain.js"
import { holdLockedNetwork, type LockedNetwork, reconcileEgress } from "../box/docker/lockdown.js"
import { egressChainName } from "../contract/deployment.js"
import { OrgConfig } from "../config/OrgConfig.js"
import { Paths, layout } from "../config/Paths.js"
import { BoxBackend } from "../backend/BoxBackend.js"
import { endedOn } from "../contract/nodeSupport.js"
import { VERSION } from "../contract/version.js"
import { Gateway } from "../gateway/egress/Gateway.js"
import { GatewayLive } from "../gateway/server.js"
import { readGatewayState, writeGatewayState } from "../contract/gatewayState.js"
import { Supervisor } from "../supervisor/Supervisor.js"
import { Runner } from "../runner/Runner.js"
import { WarmPool } from "../runner/WarmPool.js"
import { ChatClients } from "../chat/ChatClients.js"
import { ChatHub } from "../chatHub/ChatHub.js"
import { serveControl } from "./controlServer.js"
import { holdDaemonLock } from "./lock.js"
import { FleetMember } from "../fleet/FleetMember.js"
import { joinFleet } from "../fleet/join.js"
import { whereOf } from "../fleet/connect.js"
import { fleetTaskStore } from "../fleet/taskStore.js"
import { fleetRunFence } from "../fleet/fence.js"
import { SpendLedger } from "../spend/SpendLedger.js"
import { fleetSpendLedger } from "../fleet/spendLedger.js"
import { fleetMemoryLog } from "../fleet/memoryStore.js"
import { fleetRunIndex, indexRunsOf } from "../fleet/runIndex.js"
import { fleetAuditIndex } from "../fleet/auditIndex.js"
import { fleetTaintLog } from "../fleet/taintLog.js"
import { fleetApprovalBoard } from "../fleet/approvalBoard.js"
import { Audit } from "../gateway/base/Audit.js"
import { RunLog } from "../run/RunLog.js"
import { MemoryStore, memoryStoreOver } from "../memory/MemoryStore.js"
import { SqlClient } from "@effect/sql/SqlClient"
import { deploymentBoxes } from "../supervisor/watch.js"
import { boxFacts } from "../backend/foundBox.js"
import type { FleetBox } from "../contract/fleet.js"

/** The deployment's locked box network, as the daemon made it (boxes reach the gateway on its bridge address). */
class BoxNetwork extends Context.Tag("roster/daemon/BoxNetwork")<BoxNetwork, LockedNetwork>() {}

/**
 * Before anything is written or touched: a second daemon of this deployment stops here, having
 * changed nothing; an invalid org.toml or an engine that does not answer stops it too.
 */
const Start = Layer.scopedDiscard(Effect.gen(function*() {
  yield* holdDaemonLock
  yield* (yield* OrgConfig).snapshot
  yield* (yield* BoxBackend).ping
}))

/**
 * Under `[cluster]`, this daemon as a node of its fleet, before any box is touched: a database
 * that refuses it, a shared folder that is not the fleet's or a node name another machine holds
 * stops the start having changed nothing. The node's task store, fence, spend ledger and worker
 * memory are then the fleet's; without `[cluster]`, the ledger is the machine's files.
 */
const Fleet = Layer.unwrapScoped(Effect.gen(function*() {
  const org = yield* (yield* OrgConfig).snapshot
  if (!org.cluster) return SpendLedger.layer
  const env = Context.pick(Paths, BoxBackend)(yield* Effect.context<Paths | BoxBackend>())
  // What a heartbeat tells the fleet of this node's boxes (shown by server status): an engine that does not
  // answer shows none for that beat, and the next beat asks again; nothing is decided on these counts.
  const boxes = deploymentBoxes.pipe(Effect.map((b) => b.length), Effect.orElseSucceed(() => 0), Effect.provide(env))
  const liveBoxes = liveBoxesWithStats.pipe(Effect.orElseSucceed(() => []), Effect.provide(env))
  const { database, instance, member, nudges } = yield* joinFleet({ cluster: org.cluster, concurrency: org.supervisor.concurrency, boxes, liveBoxes })
  yield* report(notice(`roster fleet: node ${member.node} joined; the queue, the budgets and memory are the fleet's; run folders are in its shared folder`))
  const store = fleetTaskStore(member.node, whereOf(org.cluster), instance)
  const fence = fleetRunFence(member.node, instance, org.cluster.node_timeout_s, member.cutOff)
  const ledger = fleetSpendLedger(member.node)
  const memory = Layer.succeed(MemoryStore, memoryStoreOver(fleetMemoryLog(Context.get(database, SqlClient))))
  const runs = Layer.provideMerge(RunLog.layerIndexed, Layer.merge(fleetRunIndex, fleetTaintLog))
  const audit = Layer.provideMerge(Audit.layerIndexed, fleetAuditIndex)
  const board = fleetApprovalBoard(member.node, nudges)
  return Layer.mergeAll(Layer.succeed(FleetMember, member), store, fence, ledger, memory, runs, audit, board, IndexBackfill).pipe(
    Layer.provide(Layer.succeedContext(database))
  )
}))

/**
 * This node's live boxes with the engine's stats for each, as another node's Now page shows them: the
 * boxes of runs (a warm box a run took, as its run's), not the warm boxes waiting for a run.
 */
const liveBoxesWithStats = Effect.gen(function*() {
  const backend = yield* BoxBackend
  const now = yield* Clock.currentTimeMillis
  const runs = (yield* deploymentBoxes).filter((b) => b.kind !== "warm" || b.takenWarm === true)
  return yield* Effect.forEach(runs, (b) =>
    backend.stats(b.id).pipe(
      // A box whose figures do not come (stopping, say) is listed without them.
      Effect.orElseSucceed(() => undefined),
      Effect.map((st): FleetBox => ({ ...boxFacts(b, now), ...(st ? { cpu_percent: st.cpuPercent, memory_bytes: st.memoryBytes } : {}) }))
    ), { concurrency: 8 })
})

/** What this node's runs left out of the run index, put in once the daemon has joined (in the background; a failure is a warning). */
const IndexBackfill = Layer.scopedDiscard(Effect.gen(function*() {
  const node = (yield* Paths).fleet?.node
  if (!node) return
  yield* indexRunsOf(node).pipe(
    Effect.catchAll((e) => Effect.logWarning(`fleet: the run index was not filled in from this node's run folders (${e.message})`)),
    logDefects("fleet: unexpected failure filling in the run index from this node's run folders"),
    Effect.forkScoped
  )
})).pipe(Layer.provide(fleetRunIndex))

/** The locked network: removed when the daemon stops, once its boxes are gone (one a CLI's box still uses is kept). */
const Network = Layer.scoped(BoxNetwork, holdLockedNetwork)

/** `gateway.json`, as long as this daemon's gateway listens: what a CLI reads to find it (removed only if still this process's). */
const recordGateway = (port: number, addrs: ReadonlyArray<string>, boxAddr: string) =>
  Effect.gen(function*() {
    const paths = yield* Paths
    const files = layout(paths)
    const fs = yield* FileSystem.FileSystem
    yield* writeGatewayState({
      port,
      addrs,
      box_addr: boxAddr,
      pid: process.pid,
      config_root: paths.config,
      version: VERSION,
      started_at: new Date(yield* Clock.currentTimeMillis).toISOString(),
      log: files.gatewayLog
    })
    yield* Effect.addFinalizer(() =>
      readGatewayState.pipe(
        Effect.flatMap((s) => (s?.pid === process.pid ? fs.remove(files.gatewayJson) : Effect.void)),
        // A gateway.json left names this process, dead once it exits: the next start and server status read it as stale.
        Effect.ignore
      )
    )
  })

/**
 * The gateway on loopback and on the network's bridge address (where boxes reach it as
 * host.docker.internal), its state file, and the egress lockdown pinned to its port — a
 * stopped daemon leaves no rule behind (the next start, or the next run, rebuilds what the
 * config asks for).
 */
const GatewayUp = Layer.scoped(Gateway, Effect.gen(function*() {
  const org = yield* (yield* OrgConfig).snapshot
  const paths = yield* Paths
  const net = yield* BoxNetwork
  // `roster server start --addr` for this start, else [gateway] listen, else loopback and the bridge.
  // Config.option fails only on a malformed value of a string: never, so none is the only fallback there is.
  const override = yield* Config.option(Config.string("ROSTER_GATEWAY_LISTEN")).pipe(Effect.orElseSucceed(() => Option.none<string>()))
  const listen = Option.match(override, { onNone: () => org.gateway.listen, onSome: (s) => s.split(",").map((a) => a.trim()).filter((a) => a !== "") })
  const placed = gatewayAddresses(listen, net)
  if (placed instanceof ListenRefused) return yield* placed
  const { addrs, boxAddr } = placed
  const gateway = Context.get(yield* Layer.build(GatewayLive({ addrs, port: org.gateway.port })), Gateway)
  // The lockdown before the state file: `server start` (and every run) reads the state file as
  // "the daemon is up", and a box started before the last rule is in would have a way out.
  yield* reconcileEgress(org.box, net, gateway.port())
  yield* Effect.addFinalizer(() => removeEgressLockdown(egressChainName(paths.config)))
  yield* recordGateway(gateway.port(), addrs, boxAddr)
  yield* report(notice(`roster gateway ${VERSION} listening on ${addrs.map((a) => `${a}:${gateway.port()}`).join(", ")} (config ${paths.config})`))
  // Said once at each start: a daemon holds every credential of its deployment and parses every request its boxes make.
  const ended = endedOn(process.versions.node, new Date(yield* Clock.currentTimeMillis).toISOString().slice(0, 10))
  if (ended) {
    yield* report(notice(`this daemon runs on Node ${process.version}, past its end of life (${ended}): it gets no security fixes — run roster on Node 24 LTS`, "warning"))
  }
  return gateway
}))

/** The control API on its socket, once the supervisor (and the chat listeners, which need its slots) run. */
const Control = Layer.scopedDiscard(Effect.gen(function*() {
  const socket = yield* serveControl()
  yield* report(notice(`roster supervisor running; control API on ${socket}`))
}))

/** Stores changed outside a run (edited on the host) still get a snapshot to restore from. */
const Sweeps = Layer.scopedDiscard(Effect.forkScoped(sweepLoop))

/** A `:latest`-style deployment picks up a published image on every daemon start (in the background; a failure is a warning). */
const ImagePull = Layer.scopedDiscard(Effect.gen(function*() {
  const org = yield* (yield* OrgConfig).snapshot
  if (!isRegistryRef(org.engine.image)) return
  yield* (yield* ImageStore).ensure(org.engine.image, { force: true }).pipe(
    Effect.catchAll((e) => report(notice(e.message, "warning"))),
    logDefects(`unexpected failure pulling ${org.engine.image}`),
    Effect.forkScoped
  )
}))

/**
 * The daemon, as layers: each builds after what it is given and closes before it. The lock
 * first; the network; the gateway in it; the supervisor, which adopts what a dead daemon left
 * before the queue moves; the chat listeners (a chat session's box takes a supervisor slot);
 * then the control API, the sweeps and the image pull. Stopping unwinds the same order back.
 */
export const DaemonLive = Layer.mergeAll(Control, Sweeps, ImagePull, WarmPool.daemonHooks).pipe(
  Layer.provide(Layer.provide(ChatHub.layer, ChatClients.layer)),
  Layer.provideMerge(Supervisor.layer),
  Layer.provide(GatewayUp),
  Layer.provide(Network),
  // The daemon's own Runner: over its fleet stores, and holding a handed-over run's box row in a fleet
  // (fresh: never the edge's, which RosterLive built over the machine's files without FleetMember).
  Layer.provideMerge(Layer.fresh(Runner.layer)),
  // Its warm boxes: made after a worker's run, taken by the next; recycled when the daemon stops.
  Layer.provideMerge(WarmPool.layer),
  Layer.provideMerge(Fleet),
  Layer.provide(Start)
)

/** The daemon in the foreground: {@link DaemonLive}, run until interrupted. */
export const runDaemon = Effect.fn("daemon.run")(function*() {
  return yield* Layer.launch(DaemonLive)
})
