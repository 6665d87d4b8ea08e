import { Effect } from "effect"
import type { NetworkInfo } from "../../docker/Docker.js"
import { Firewall, type FirewallTool } from "../Firewall.js"
import { LockdownError } from "../../backend/errors.js"

// The iptables side of the lockdown (`[box] egress_lockdown`): a deployment's own chain that pins
// its boxes' traffic to the host to its gateway port, with an ip6tables twin. The network and
// gateway checks are in lockdown.ts; this file only speaks iptables.

const TOOLS = ["iptables", "ip6tables"] as const

export const bridgeInterface = (net: NetworkInfo): string =>
  net.options["com.docker.network.bridge.name"] ?? `br-${net.id.slice(0, 12)}`

/** The chain's contents, in order: the gateway port first, then drop — order is the whole point. */
export const egressChainRules = (gatewayPort: number): ReadonlyArray<ReadonlyArray<string>> => [
  ["-p", "tcp", "--dport", String(gatewayPort), "-j", "ACCEPT"],
  ["-j", "DROP"]
]

/** This deployment's boxes' traffic to any address of the host itself (not only the bridge's) goes through its chain. */
export const egressJump = (tool: FirewallTool, net: NetworkInfo, chain: string): ReadonlyArray<string> => [
  "INPUT",
  ...(tool === "iptables" ? ["-s", net.subnets[0]?.subnet ?? ""] : ["-i", bridgeInterface(net)]),
  "-m", "addrtype", "--dst-type", "LOCAL",
  "-j", chain
]

/** Pins box->host traffic to the gateway port, rebuilt each time so it is idempotent; fails closed. */
export const ensureEgressLockdown = Effect.fn("lockdown.ensureEgressLockdown")(function*(
  net: NetworkInfo,
  gatewayPort: number,
  chain: string
) {
  const fw = yield* Firewall
  // iptables and ip6tables keep separate tables: the two are checked (and mended) at once.
  yield* Effect.forEach(TOOLS, (tool) => pinTool(fw, tool, net, gatewayPort, chain), { concurrency: "unbounded", discard: true })
})

const pinTool = (fw: Firewall["Type"], tool: FirewallTool, net: NetworkInfo, gatewayPort: number, chain: string) =>
  Effect.gen(function*() {
    const fail = new LockdownError({
      reason: `[box] egress_lockdown is on but the ${tool} rules could not be installed for ${net.name} ` +
        `(they need root / CAP_NET_ADMIN and the ${tool} command: apt-get install -y iptables). ` +
        `Run roster as root, or set egress_lockdown = false in org.toml`
    })
    // Rebuilt only when it differs (a new port): a flush opens a moment in which the chain drops nothing.
    if (!chainIsPinnedTo(yield* fw.output(tool, ["-S", chain]), chain, gatewayPort)) {
      yield* fw.run(tool, ["-N", chain]) // "already exists" is fine
      if (!(yield* fw.run(tool, ["-F", chain]))) return yield* Effect.fail(fail)
      for (const rule of egressChainRules(gatewayPort)) {
        if (!(yield* fw.run(tool, ["-A", chain, ...rule]))) return yield* Effect.fail(fail)
      }
    }
    const jump = egressJump(tool, net, chain)
    if (!(yield* fw.run(tool, ["-C", ...jump])) && !(yield* fw.run(tool, ["-I", ...jump]))) {
      return yield* Effect.fail(fail)
    }
  })

/**
 * Removes a chain and every INPUT rule that jumps to it (whatever subnet it was made for), so
 * lockdown turned off — or a daemon stopped — leaves no rule behind that could cut a box off
 * from its gateway. Every run with the lockdown off asks this, so a chain that is not there costs
 * one listing per tool: the whole table's (`-S`) names both the jumps and the chain (a daemon's
 * `iptables` processes cost ~20 ms of its CPU each to spawn).
 */
export const removeEgressLockdown = Effect.fn("lockdown.removeEgressLockdown")(function*(chain: string) {
  const fw = yield* Firewall
  // iptables and ip6tables keep separate tables: the two are cleaned at once.
  const by = yield* Effect.forEach(TOOLS, (tool) =>
    Effect.gen(function*() {
      let removed = 0
      const failed: Array<string> = []
      // A table that cannot be listed (not root, no tool) holds no chain of roster's: only root makes one.
      const table = (yield* fw.output(tool, ["-S"])) ?? ""
      for (const rule of jumpsTo(table, chain)) {
        if (yield* fw.run(tool, ["-D", ...rule])) removed++
        else failed.push(`${tool} -D ${rule.join(" ")}`)
      }
      if (definesChain(table, chain)) {
        yield* fw.run(tool, ["-F", chain])
        if (yield* fw.run(tool, ["-X", chain])) removed++
        else failed.push(`${tool} -X ${chain}`)
      }
      return { removed, failed }
    }), { concurrency: "unbounded" })
  const failed = by.flatMap((b) => b.failed)
  // The rules it could not remove keep pinning (or cutting off) this deployment's boxes: said, with the commands.
  if (failed.length > 0) {
    yield* Effect.logWarning(`the egress chain ${chain} was not removed whole: ${failed.join("; ")} failed — run them as root (or roster doctor --fix)`)
  }
  return { removed: by.reduce((a, b) => a + b.removed, 0), failed }
})

/** The INPUT rules of an `iptables -S INPUT` listing that jump to `chain`, as arguments for -D. */
export const jumpsTo = (listing: string, chain: string): ReadonlyArray<ReadonlyArray<string>> =>
  listing.split("\n")
    .map((l) => l.trim().split(/\s+/))
    .filter((w) => w[0] === "-A" && w[1] === "INPUT" && w.at(-1) === chain && w.at(-2) === "-j")
    .map((w) => w.slice(1))

/** Whether an `iptables -S` listing defines `chain` (any name: a survey also removes an older roster's). */
export const definesChain = (listing: string, chain: string): boolean =>
  listing.split("\n").some((l) => {
    const w = l.trim().split(/\s+/)
    return w[0] === "-N" && w[1] === chain
  })

/** The roster chains an `iptables -S` listing defines (`-N ROSTER-...`). */
export const rosterChains = (listing: string): ReadonlyArray<string> =>
  listing.split("\n").map((l) => l.trim().split(/\s+/)).filter((w) => w[0] === "-N" && w[1]?.startsWith("ROSTER-")).map((w) => w[1] ?? "")

/** Whether an `iptables -S <chain>` listing is exactly: accept the gateway port, then drop. */
export const chainIsPinnedTo = (listing: string | undefined, chain: string, port: number) => {
  const rules = (listing ?? "").split("\n").map((l) => l.trim()).filter((l) => l.startsWith(`-A ${chain} `))
  return rules.length === 2 &&
    /^-A \S+ -p tcp( -m tcp)? --dport (\d+) -j ACCEPT$/.exec(rules[0] ?? "")?.[2] === String(port) &&
    rules[1] === `-A ${chain} -j DROP`
}
