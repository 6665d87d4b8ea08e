import { Effect } from "effect"
import { EGRESS_CHAIN, LOCKDOWN_NETWORK } from "../contract/constants.js"
import type { NetworkInfo } from "../docker/Docker.js"
import { Firewall, type FirewallTool } from "./Firewall.js"
import { LockdownError } from "./lockdownError.js"

// The iptables side of the lockdown (`[box] egress_lockdown`): a chain that pins box->host
// traffic to the gateway port, with an ip6tables twin. The network and gateway checks are in
// lockdown.ts; this file only speaks iptables.

export const bridgeInterface = (net: NetworkInfo): string =>
  net.options["com.docker.network.bridge.name"] ?? `br-${net.id.slice(0, 12)}`

/** The chain's contents, in order: the gateway port first, then drop — order is the whole point. */
export const egressChainRules = (gatewayPort: number): ReadonlyArray<ReadonlyArray<string>> => [
  ["-p", "tcp", "--dport", String(gatewayPort), "-j", "ACCEPT"],
  ["-j", "DROP"]
]

/** Box traffic to any address of the host itself (not only the bridge's) goes through the chain. */
export const egressJump = (tool: FirewallTool, net: NetworkInfo): ReadonlyArray<string> => [
  "INPUT",
  ...(tool === "iptables" ? ["-s", net.subnets[0]?.subnet ?? ""] : ["-i", bridgeInterface(net)]),
  "-m", "addrtype", "--dst-type", "LOCAL",
  "-j", EGRESS_CHAIN
]

/** Pins box->host traffic to the gateway port, rebuilt each time so it is idempotent; fails closed. */
export const ensureEgressLockdown = Effect.fn("lockdown.ensureEgressLockdown")(function*(
  net: NetworkInfo,
  gatewayPort: number
) {
  const fw = yield* Firewall
  for (const tool of ["iptables", "ip6tables"] as const) {
    const fail = new LockdownError({
      reason: `[box] egress_lockdown is on but the ${tool} rules could not be installed for ${LOCKDOWN_NETWORK} ` +
        `(they need root / CAP_NET_ADMIN and the ${tool} command: apt-get install -y iptables). ` +
        `Run roster as root, or set egress_lockdown = false in org.toml`
    })
    yield* fw.run(tool, ["-N", EGRESS_CHAIN]) // "already exists" is fine
    if (!(yield* fw.run(tool, ["-F", EGRESS_CHAIN]))) return yield* Effect.fail(fail)
    for (const rule of egressChainRules(gatewayPort)) {
      if (!(yield* fw.run(tool, ["-A", EGRESS_CHAIN, ...rule]))) return yield* Effect.fail(fail)
    }
    const jump = egressJump(tool, net)
    if (!(yield* fw.run(tool, ["-C", ...jump])) && !(yield* fw.run(tool, ["-I", ...jump]))) {
      return yield* Effect.fail(fail)
    }
  }
})
