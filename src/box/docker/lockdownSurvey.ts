import { Path } from "@effect/platform"
import { Effect } from "effect"
import { LABEL_DEPLOYMENT, LEGACY_CHAIN, LEGACY_NETWORK } from "../../contract/constants.js"
import { egressChainName, LABEL_NETWORK, LABEL_NETWORK_STATE } from "../../contract/deployment.js"
import { readGatewayStateAt } from "../../contract/gatewayState.js"
import { ownerAlive } from "../../contract/owner.js"
import { Docker } from "../../docker/Docker.js"
import { definesChain, jumpsTo, removeEgressLockdown, rosterChains } from "./egressChain.js"
import { Firewall } from "../Firewall.js"

/** One deployment's lockdown state on this host, as `roster doctor` shows it. */
export interface DeploymentLockdown {
  /** The config root the network is labelled with; null for what an older roster left (shared by all). */
  readonly deployment: string | null
  readonly network: { readonly name: string; readonly subnet: string; readonly containers: number } | null
  /** Its chain in iptables/ip6tables, and how many INPUT rules jump to it. */
  readonly chain: { readonly name: string; readonly jumps: number } | null
  /** The pid of its daemon when one is running (gateway.json names a live process of that deployment). */
  readonly daemon: number | null
  /** Nothing uses it: no daemon runs for it (or it is an older roster's shared state). */
  readonly stale: boolean
}

const chainsOnHost = Effect.gen(function*() {
  const fw = yield* Firewall
  const found = new Map<string, number>()
  for (const tool of ["iptables", "ip6tables"] as const) {
    const all = (yield* fw.output(tool, ["-S"])) ?? ""
    for (const chain of [...rosterChains(all), ...(definesChain(all, LEGACY_CHAIN) ? [LEGACY_CHAIN] : [])]) {
      found.set(chain, (found.get(chain) ?? 0) + jumpsTo(all, chain).length)
    }
  }
  return found
})

const liveDaemon = (stateDir: string | undefined, configRoot: string) =>
  Effect.gen(function*() {
    if (!stateDir) return null
    const state = yield* readGatewayStateAt((yield* Path.Path).join(stateDir, "gateway.json"))
    if (!state || state.config_root !== configRoot) return null
    return (yield* ownerAlive({ pid: state.pid, start: "" })) ? state.pid : null
  })

/** Every roster network and chain on this host, with the deployment each belongs to and whether it is still used. */
export const surveyLockdown = Effect.gen(function*() {
  const docker = yield* Docker
  const chains = yield* chainsOnHost
  const out: Array<DeploymentLockdown> = []
  for (const listed of yield* docker.networkList([LABEL_NETWORK])) {
    const net = (yield* docker.networkInspect(listed.name)) ?? listed
    const configRoot = net.labels[LABEL_DEPLOYMENT] ?? null
    const chainName = configRoot ? egressChainName(configRoot) : net.name === LEGACY_NETWORK ? LEGACY_CHAIN : null
    const jumps = chainName === null ? undefined : chains.get(chainName)
    if (chainName) chains.delete(chainName)
    const daemon = configRoot ? yield* liveDaemon(net.labels[LABEL_NETWORK_STATE], configRoot) : null
    out.push({
      deployment: configRoot,
      network: { name: net.name, subnet: net.subnets[0]?.subnet ?? "", containers: net.containers },
      chain: chainName && jumps !== undefined ? { name: chainName, jumps } : null,
      daemon,
      stale: daemon === null
    })
  }
  // A chain whose network is gone: nobody's boxes can use it.
  for (const [name, jumps] of chains) out.push({ deployment: null, network: null, chain: { name, jumps }, daemon: null, stale: true })
  return out
})

/** Removes what a survey found stale: its chain and jumps, and its network when no container is on it. */
export const fixStale = (found: ReadonlyArray<DeploymentLockdown>) =>
  Effect.gen(function*() {
    const docker = yield* Docker
    const done: Array<string> = []
    for (const d of found.filter((x) => x.stale)) {
      if (d.chain) {
        const removal = yield* removeEgressLockdown(d.chain.name)
        done.push(removal.failed.length === 0
          ? `removed chain ${d.chain.name} and its ${d.chain.jumps} jump(s)`
          : `could not remove chain ${d.chain.name} whole: ${removal.failed.join("; ")} failed — run them as root`)
      }
      if (d.network && d.network.containers === 0) {
        const removed = yield* docker.networkRemove(d.network.name).pipe(Effect.either)
        done.push(removed._tag === "Right" ? `removed network ${d.network.name}` : `could not remove network ${d.network.name}: ${removed.left.message}`)
      } else if (d.network) {
        done.push(`kept network ${d.network.name}: ${d.network.containers} container(s) still on it`)
      }
    }
    return done
  })

