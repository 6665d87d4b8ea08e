import { sweepLoop } from "../supervisor/storeCare.js"
import { FileSystem } from "@effect/platform"
import { Clock, Effect, Layer } from "effect"
import { notice, report } from "../report/Reporter.js"
import { ImageStore, isRegistryRef } from "../box/ImageStore.js"
import { removeEgressLockdown } from "../box/egressChain.js"
import { bridgeAddress, ensureLockedNetwork, reconcileEgress } from "../box/lockdown.js"
import { egressChainName } from "../contract/deployment.js"
import { OrgConfig } from "../config/OrgConfig.js"
import { Paths, layout } from "../config/Paths.js"
import { Docker } from "../docker/Docker.js"
import { VERSION } from "../contract/version.js"
import { ensureCa } from "../gateway/certs/ca.js"
import { serveGateway } from "../gateway/server.js"
import { readGatewayState, writeGatewayState } from "../contract/gatewayState.js"
import { Supervisor } from "../supervisor/Supervisor.js"
import { ChatHub } from "../chat/ChatHub.js"
import { serveControl } from "./controlServer.js"
import { holdDaemonLock } from "./lock.js"

/**
 * The daemon in the foreground: the locked network, the CA, the gateway on loopback and on the
 * network's bridge address (where boxes reach it as host.docker.internal), its state file,
 * and a fresh pull of a registry box image. Runs until interrupted; the scope closes it all.
 */
export const runDaemon = Effect.fn("daemon.run")(function*() {
  // Before anything is written or touched: a second daemon of this deployment stops here, having changed nothing.
  yield* holdDaemonLock
  const org = yield* (yield* OrgConfig).snapshot
  const paths = yield* Paths
  const files = layout(paths)
  const fs = yield* FileSystem.FileSystem
  const docker = yield* Docker
  yield* docker.ping
  const net = yield* ensureLockedNetwork()
  // Registered first, so it runs last: once the daemon's boxes are gone its network goes too
  // (the next start makes it again); one still in use by a CLI's box is kept.
  yield* Effect.addFinalizer(() => docker.networkRemove(net.name).pipe(Effect.ignore))
  yield* ensureCa()
  const addrs = ["127.0.0.1", bridgeAddress(net)]
  const bound = yield* serveGateway({ addrs, port: org.gateway.port })
  yield* writeGatewayState({
    port: bound.port,
    addrs,
    pid: process.pid,
    config_root: paths.config,
    version: VERSION,
    started_at: new Date(yield* Clock.currentTimeMillis).toISOString(),
    log: files.gatewayLog
  })
  yield* Effect.addFinalizer(() =>
    readGatewayState.pipe(
      Effect.flatMap((s) => (s?.pid === process.pid ? fs.remove(files.gatewayJson) : Effect.void)),
      Effect.ignore
    )
  )
  yield* reconcileEgress(org.box, net, bound.port)
  // A stopped daemon leaves no rule behind: its boxes are gone, and a chain pinned to its port
  // must not outlive it (the next start, or the next run, rebuilds what the config asks for).
  yield* Effect.addFinalizer(() => removeEgressLockdown(egressChainName(paths.config)).pipe(Effect.ignore))
  yield* report(notice(`roster gateway ${VERSION} listening on ${addrs.map((a) => `${a}:${bound.port}`).join(", ")} (config ${paths.config})`))
  // The supervisor adopts what a dead daemon left before the queue moves; then the API opens.
  const supervisor = yield* Layer.build(Supervisor.layer)
  // The chat listeners need the supervisor (a chat session's box takes a slot of its concurrency).
  const chat = yield* Layer.build(ChatHub.layer.pipe(Layer.provide(Layer.succeedContext(supervisor))))
  const socket = yield* serveControl().pipe(Effect.provide(supervisor), Effect.provide(chat))
  yield* report(notice(`roster supervisor running; control API on ${socket}`))
  // Stores changed outside a run (edited on the host) still get a snapshot to restore from.
  yield* Effect.forkScoped(sweepLoop)
  // A `:latest`-style deployment picks up a published image on every daemon start.
  if (isRegistryRef(org.engine.image)) {
    yield* (yield* ImageStore).ensure(org.engine.image, { force: true }).pipe(
      Effect.catchAll((e) => report(notice(e.message, "warning"))),
      Effect.forkScoped
    )
  }
  return yield* Effect.never
})
