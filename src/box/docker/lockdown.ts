import { Effect } from "effect"
import type { BoxPolicy } from "../../config/schema.js"
import { Paths, layout } from "../../config/Paths.js"
import { Docker, type DockerError, type NetworkInfo } from "../../docker/Docker.js"
import { isLoopback } from "../../contract/addresses.js"
import { GatewayProbe } from "../../contract/GatewayProbe.js"
import { readGatewayState } from "../../contract/gatewayState.js"
import { LABEL_DEPLOYMENT } from "../../contract/constants.js"
import { egressChainName, LABEL_NETWORK, LABEL_NETWORK_STATE, lockdownNetworkName } from "../../contract/deployment.js"
import { onceADay } from "../daily.js"
import { ensureEgressLockdown, removeEgressLockdown } from "./egressChain.js"
import { GatewayDown, LockdownError } from "../../backend/errors.js"

export { GatewayDown, LockdownError }

/** The deployment's locked network as the engine has it (what the daemon holds and its lockdown is pinned to). */
export type LockedNetwork = NetworkInfo

const ICC = "com.docker.network.bridge.enable_icc"

const networkProblem = (net: NetworkInfo): string | undefined => {
  if (!net.internal) {
    return `the existing "${net.name}" docker network is not internal, so boxes could route past the gateway`
  }
  if (net.options[ICC] !== "false") {
    return `the existing "${net.name}" docker network lets boxes reach each other (inter-container traffic is on)`
  }
  if (net.subnets.length === 0 || !net.subnets[0]?.gateway) {
    return `the "${net.name}" docker network has no gateway address for the box to reach roster's gateway on`
  }
  return undefined
}

/**
 * The deployment's own locked network (`roster-locked-<id>`): an internal bridge (no route off
 * the host at all — a masquerade-off bridge still forwards box packets with their private source
 * address) with inter-container traffic off, so a box can reach nothing but the host's bridge
 * address. One per deployment, so each has its own subnet and its own iptables chain, and no
 * deployment's lockdown (or its absence) touches another's boxes.
 */
export const ensureLockedNetwork = Effect.fn("lockdown.ensureLockedNetwork")(function*() {
  const docker = yield* Docker
  const paths = yield* Paths
  const name = lockdownNetworkName(paths.config)
  const existing = yield* docker.networkInspect(name)
  const net = existing ?? (yield* docker.networkCreate({
    name,
    internal: true,
    options: {
      [ICC]: "false",
      "com.docker.network.bridge.enable_ip_masquerade": "false"
    },
    labels: { [LABEL_NETWORK]: "locked", [LABEL_DEPLOYMENT]: paths.config, [LABEL_NETWORK_STATE]: paths.state }
  }).pipe(
    Effect.mapError((e: DockerError) =>
      new LockdownError({ reason: `the "${name}" docker network could not be created (${e.detail})` })
    )
  ))
  const problem = networkProblem(net)
  if (problem) {
    return yield* Effect.fail(new LockdownError({
      reason: `${problem}. Remove it and let roster recreate it: docker network rm ${name}`
    }))
  }
  return net
})

/**
 * The host pinning as `[box] egress_lockdown` says now, reconciled on every run and daemon
 * start: on, the deployment's chain is rebuilt for its current gateway port; off, its chain and
 * jumps are removed, so no rule of roster's affects its boxes.
 */
export const reconcileEgress = (policy: BoxPolicy, net: NetworkInfo, port: number) =>
  Effect.flatMap(Paths, (paths) =>
    policy.egress_lockdown
      ? ensureEgressLockdown(net, port, egressChainName(paths.config))
      : removeEgressLockdown(egressChainName(paths.config)).pipe(Effect.asVoid))

export const bridgeAddress = (net: NetworkInfo): string => net.subnets[0]?.gateway ?? ""
/**
 * Without the host pinning, a box reaches every port of this host. Said at most once a day per
 * deployment: a warning on every run is one nobody reads.
 */
const warnOpenHostDaily = (gatewayPort: number) =>
  Effect.flatMap(Paths, (paths) =>
    onceADay(
      layout(paths).openHostWarned,
      Effect.logWarning(
        "the box can't reach the internet, but it can reach this host on every port (a local database, " +
          "a published container port, ssh) — these bypass the gateway. Set `[box] egress_lockdown = true` " +
          `in org.toml to pin box traffic to the gateway on :${gatewayPort} (needs root for iptables). ` +
          "(said once a day)"
      )
    ))

export interface Lockdown {
  readonly network: NetworkInfo
  readonly gatewayAddress: string
  readonly gatewayPort: number
  /** The daemon's word on which connections have a credential and from where (undefined from an older daemon). */
  readonly credentials: Readonly<Record<string, string>> | undefined
}

/** This deployment's gateway, up and answering as this deployment, on an address a box can reach. */
const checkGateway = Effect.fn("lockdown.checkGateway")(function*() {
  const paths = yield* Paths
  const state = yield* readGatewayState
  if (!state) {
    return yield* Effect.fail(new GatewayDown({ port: 0, reason: "the gateway is not running (no state/gateway.json)" }))
  }
  const port = state.port
  // A loopback-only gateway is healthy from the host but unreachable from a box.
  if (!state.addrs.some((a) => !isLoopback(a) && a !== "localhost")) {
    return yield* Effect.fail(new LockdownError({
      reason: `the gateway is bound to loopback only (${state.addrs.join(", ")}) and boxes cannot reach it. ` +
        `Restart it with the default addresses: roster server stop && roster server start`
    }))
  }
  const health = yield* (yield* GatewayProbe).health(port)
  if (!health?.ok) {
    return yield* Effect.fail(new GatewayDown({ port, reason: `the gateway is not answering on :${port}` }))
  }
  // The right port answering is not enough: it must be this deployment's daemon, or the box
  // would run under another deployment's policy.
  if (health.config_root !== paths.config) {
    return yield* Effect.fail(new GatewayDown({
      port,
      reason: `the gateway on :${port} belongs to another deployment (config ${health.config_root ?? "unknown"}); ` +
        `stop that one or set [gateway] port in ${paths.config}/org.toml to a free port`
    }))
  }
  return { port, credentials: health.credentials, boxAddr: state.box_addr }
})

/**
 * Everything that must hold before a box may start: the network, this deployment's gateway, the
 * host pinning. The network and the gateway are checked at once; with the pinning off, its
 * removal needs neither and runs beside them (a run's start waits on the slowest, not the sum).
 */
export const ensureLockdown = Effect.fn("lockdown.ensureLockdown")(function*(policy: BoxPolicy) {
  const chain = egressChainName((yield* Paths).config)
  const [net, gateway] = yield* Effect.all([
    ensureLockedNetwork(),
    checkGateway(),
    policy.egress_lockdown ? Effect.void : removeEgressLockdown(chain)
  ], { concurrency: "unbounded" })
  if (policy.egress_lockdown) yield* ensureEgressLockdown(net, gateway.port, chain)
  else yield* warnOpenHostDaily(gateway.port)
  // Where the daemon said boxes reach it (--addr / [gateway] listen), else the bridge as before.
  return { network: net, gatewayAddress: gateway.boxAddr ?? bridgeAddress(net), gatewayPort: gateway.port, credentials: gateway.credentials } satisfies Lockdown
})

/** The locked network held for as long as the scope (the daemon's): removed when it closes, once no box uses it (one a CLI's box still uses is kept). */
export const holdLockedNetwork = Effect.gen(function*() {
  const docker = yield* Docker
  const net = yield* ensureLockedNetwork()
  yield* Effect.addFinalizer(() =>
    docker.networkRemove(net.name).pipe(
      Effect.catchAll((e) => Effect.logWarning(`the locked network ${net.name} was not removed (${e.message}); roster server start uses it again, or: docker network rm ${net.name}`))
    ))
  return net
})
