import * as net from "node:net"
import type * as os from "node:os"
import { isWildcardAddress } from "../../contract/addresses.js"

export type Interfaces = NodeJS.Dict<ReadonlyArray<os.NetworkInterfaceInfo>>

/** Interfaces an engine or a VM manager makes for its containers: boxes live behind them. */
const CONTAINER_BRIDGE = /^(docker|br-|veth|virbr|cni|podman|flannel|cali|vxlan|weave)/

const bare = (address: string) => {
  const unbracketed = address.replace(/^\[(.*)\]$/, "$1")
  // An IPv4 peer on a dual-stack socket.
  return unbracketed.startsWith("::ffff:") && net.isIPv4(unbracketed.slice(7)) ? unbracketed.slice(7) : unbracketed
}

/** `host:port` (`[v6]:port` too) as its host and port. */
export const splitHostPort = (at: string) => {
  const i = at.lastIndexOf(":")
  return { host: at.slice(0, i).replace(/^\[(.*)\]$/, "$1"), port: Number(at.slice(i + 1)) }
}

/** The interface that holds `address` on this machine, if any. */
export const interfaceOf = (address: string, interfaces: Interfaces): string | undefined => {
  const a = bare(address)
  for (const [name, infos] of Object.entries(interfaces)) {
    if (infos?.some((i) => bare(i.address) === a)) return name
  }
  return undefined
}

/**
 * Why a runner RPC may not listen at `address` (an IP this machine holds), or undefined: never on
 * every address (a box network's among them), never on a container bridge, never on an address
 * that is not this machine's.
 */
export const listenProblem = (address: string, interfaces: Interfaces): string | undefined => {
  const a = bare(address)
  if (isWildcardAddress(a)) return "is every address of this machine, the box networks' among them"
  const name = interfaceOf(a, interfaces)
  // An interface that is down is not listed either: nothing to listen on until it is up.
  if (name === undefined) return "is not an address of this machine (of an interface that is up)"
  if (CONTAINER_BRIDGE.test(name)) return `is on ${name}, a container bridge: boxes live on that network`
  return undefined
}

/**
 * Why a connection from `peer` is refused, or undefined. A peer on the network of one of this
 * machine's other interfaces — a box's bridge, whatever its name — is refused: with the egress
 * lockdown off a box can reach every address of its host, and this is what keeps it out of the
 * RPC even then. Peers on the listening interface's own network, and routed ones, are let in to
 * show their signature.
 */
export const peerProblem = (peer: string, listening: string, interfaces: Interfaces): string | undefined => {
  const p = bare(peer)
  const family = net.isIPv6(p) ? "ipv6" : "ipv4"
  for (const [name, infos] of Object.entries(interfaces)) {
    if (name === listening) continue
    for (const info of infos ?? []) {
      if (info.internal || info.cidr === null) continue
      const [base, bits] = info.cidr.split("/")
      const infoFamily = net.isIPv6(bare(base ?? "")) ? "ipv6" : "ipv4"
      if (infoFamily !== family || base === undefined) continue
      const list = new net.BlockList()
      list.addSubnet(bare(base), Number(bits), infoFamily)
      if (list.check(p, family)) return `it comes from the network of ${name}, not the one this RPC listens on`
    }
  }
  return undefined
}
