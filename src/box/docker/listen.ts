import { Schema } from "effect"
import { isIP } from "node:net"
import type { NetworkInfo } from "../../docker/Docker.js"
import { isWildcardAddress } from "../../contract/addresses.js"
import { bridgeAddress } from "./lockdown.js"

/** `--addr` / `[gateway] listen` that boxes could not reach the gateway at, with why and the fix. */
export class ListenRefused extends Schema.TaggedError<ListenRefused>()("ListenRefused", { detail: Schema.String }) {
  override get message() {
    return `the gateway's addresses are refused: ${this.detail} — nothing was started`
  }
}

const v4 = (a: string) => a.split(".").reduce((n, part) => n * 256 + Number(part), 0)
const inSubnet = (addr: string, cidr: string) => {
  const [base, bits] = cidr.split("/")
  if (isIP(addr) !== 4 || !base || isIP(base) !== 4 || bits === undefined) return false
  const size = 2 ** (32 - Number(bits))
  return Math.floor(v4(addr) / size) === Math.floor(v4(base) / size)
}

/**
 * Where the gateway listens and where boxes reach it. Without `listen`: loopback and the locked
 * network's bridge address. With it: loopback (the CLI's, always) and those addresses, the first
 * that is not loopback being the boxes' — refused, naming the fix, when only loopback is named or
 * when boxes on the locked network could not reach it (an internal network reaches nothing outside
 * its own subnet). One that is not this machine's fails where the gateway binds it, saying so (an
 * idle bridge's addresses are not in Node's list of interfaces, so the bind is the one true test).
 */
export const gatewayAddresses = (listen: ReadonlyArray<string> | undefined, net: NetworkInfo) => {
  const bridge = bridgeAddress(net)
  if (listen === undefined || listen.length === 0) return { addrs: ["127.0.0.1", bridge], boxAddr: bridge }
  const loopback = (a: string) => a === "::1" || a.startsWith("127.")
  const wildcard = listen.filter(isWildcardAddress)
  if (wildcard.length > 0) {
    return new ListenRefused({
      detail: `${wildcard.join(", ")} is every address of this machine (or none), so boxes and the whole network would reach the gateway: ` +
        `name one address, the locked network's bridge (${bridge}) or another address of this machine in its subnet (roster server start --addr ${bridge})`
    })
  }
  const boxAddr = listen.find((a) => !loopback(a))
  const subnet = net.subnets[0]?.subnet ?? ""
  if (boxAddr === undefined) {
    return new ListenRefused({ detail: `only loopback is named (${listen.join(", ")}), which no box can reach: add the locked network's bridge address (${bridge}), or leave --addr out` })
  }
  if (!inSubnet(boxAddr, subnet)) {
    return new ListenRefused({
      detail: `boxes on ${net.name} (${subnet}) reach only addresses in that subnet, and ${boxAddr} is not: name its bridge address (${bridge}) ` +
        `or another address of this machine in ${subnet} first (roster server start --addr ${bridge})`
    })
  }
  return { addrs: [...new Set(["127.0.0.1", ...listen])], boxAddr }
}
