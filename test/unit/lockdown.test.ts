import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Logger, Ref, TestClock } from "effect"
import { FirewallLog } from "../../src/box/Firewall.js"
import { egressChainRules, removeEgressLockdown } from "../../src/box/docker/egressChain.js"
import { fixStale } from "../../src/box/docker/lockdownSurvey.js"
import { ensureLockdown } from "../../src/box/docker/lockdown.js"
import { gatewayAddresses, ListenRefused } from "../../src/box/docker/listen.js"
import { egressChainName, lockdownNetworkName } from "../../src/contract/deployment.js"
import { defaultOrg } from "../../src/config/OrgConfig.js"
import { DockerFake, lockedNetwork } from "../../src/docker/DockerTest.js"
import { tempPaths, unitLayer, writeFixture } from "../support/harness.js"

const policy = (egress_lockdown = false) => ({ ...defaultOrg().box, egress_lockdown })

const failureText = (exit: Exit.Exit<unknown, unknown>) => (Exit.isFailure(exit) ? String(exit.cause) : "")

describe("lockdown", () => {
  it.effect("without egress_lockdown, the open-host warning is said once a day per deployment, not per run", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const said: Array<string> = []
    const logger = Logger.make(({ message }) => void said.push(String(message)))
    return Effect.gen(function*() {
      yield* TestClock.setTime(Date.parse("2026-11-29T08:00:00Z"))
      for (let i = 0; i < 3; i++) yield* ensureLockdown(policy())
      expect(said.filter((m) => m.includes("reach this host on every port"))).toHaveLength(1)
      yield* TestClock.adjust("25 hours")
      yield* ensureLockdown(policy())
      expect(said.filter((m) => m.includes("reach this host on every port"))).toHaveLength(2)
    }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)), Effect.provide(unitLayer(paths)))
  })

  it.effect("creates roster-locked as an internal bridge without inter-container traffic", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    return Effect.gen(function*() {
      const lock = yield* ensureLockdown(policy())
      const [spec] = yield* (yield* DockerFake).callsOf("networkCreate")
      expect(spec).toMatchObject({
        name: lockdownNetworkName(paths.config),
        internal: true,
        options: { "com.docker.network.bridge.enable_icc": "false" },
        labels: { "roster.network": "locked", "roster.deployment": paths.config, "roster.state": paths.state }
      })
      expect(lock.network.name).toMatch(/^roster-locked-[0-9a-f]{10}$/)
      expect(lock.gatewayAddress).toBe("172.30.0.1")
      expect(lock.gatewayPort).toBe(7300)
    }).pipe(Effect.provide(unitLayer(paths, { docker: { networks: [] } })))
  })

  it.effect("refuses an existing roster-locked that is not internal, naming the fix", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    return Effect.gen(function*() {
      const exit = yield* Effect.exit(ensureLockdown(policy()))
      expect(failureText(exit)).toContain("not internal")
      expect(failureText(exit)).toContain(`docker network rm ${lockdownNetworkName(paths.config)}`)
    }).pipe(Effect.provide(unitLayer(paths, { docker: { networks: [lockedNetwork({ name: lockdownNetworkName(paths.config), internal: false })] } })))
  })

  it.effect("refuses an existing roster-locked that lets boxes reach each other", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    return Effect.gen(function*() {
      const exit = yield* Effect.exit(ensureLockdown(policy()))
      expect(failureText(exit)).toContain("reach each other")
    }).pipe(Effect.provide(unitLayer(paths, { docker: { networks: [lockedNetwork({ name: lockdownNetworkName(paths.config), options: {} })] } })))
  })

  it.effect("refuses to run when the network cannot be created", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    return Effect.gen(function*() {
      const exit = yield* Effect.exit(ensureLockdown(policy()))
      expect(failureText(exit)).toContain("refusing to start the box with open egress")
    }).pipe(Effect.provide(unitLayer(paths, { docker: { networks: [], networkCreate: "fail" } })))
  })

  it.effect("refuses when no gateway is recorded, naming roster server start", () => {
    const paths = tempPaths()
    writeFixture({ paths, gateway: null })
    return Effect.gen(function*() {
      const exit = yield* Effect.exit(ensureLockdown(policy()))
      expect(failureText(exit)).toContain("roster server start")
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.effect("refuses a gateway that does not answer", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    return Effect.gen(function*() {
      const exit = yield* Effect.exit(ensureLockdown(policy()))
      expect(failureText(exit)).toContain("not answering on :7300")
    }).pipe(Effect.provide(unitLayer(paths, { health: () => undefined })))
  })

  it.effect("refuses a gateway of another deployment", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    return Effect.gen(function*() {
      const exit = yield* Effect.exit(ensureLockdown(policy()))
      expect(failureText(exit)).toContain("another deployment")
    }).pipe(Effect.provide(unitLayer(paths, { health: () => ({ ok: true, config_root: "/elsewhere/config" }) })))
  })

  it.effect("refuses a gateway bound to loopback only, with the fix", () => {
    const paths = tempPaths()
    writeFixture({ paths, gateway: { port: 7300, addrs: ["127.0.0.1"] } })
    return Effect.gen(function*() {
      const exit = yield* Effect.exit(ensureLockdown(policy()))
      expect(failureText(exit)).toContain("loopback only")
      expect(failureText(exit)).toContain("roster server start")
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.effect("egress_lockdown installs ACCEPT-gateway-port then DROP for every local address, v4 and v6, idempotently", () => {
    const paths = tempPaths()
    writeFixture({ paths, gateway: { port: 7411, addrs: ["127.0.0.1", "172.30.0.1"] } })
    return Effect.gen(function*() {
      yield* ensureLockdown(policy(true))
      const log = yield* Ref.get(yield* FirewallLog)
      const chain = egressChainName(paths.config)
      expect(chain).toMatch(/^ROSTER-[0-9a-f]{10}$/)
      expect(log).toEqual([
        `iptables -S ${chain}`,
        `iptables -N ${chain}`,
        `iptables -F ${chain}`,
        `iptables -A ${chain} -p tcp --dport 7411 -j ACCEPT`,
        `iptables -A ${chain} -j DROP`,
        `iptables -C INPUT -s 172.30.0.0/16 -m addrtype --dst-type LOCAL -j ${chain}`,
        `ip6tables -S ${chain}`,
        `ip6tables -N ${chain}`,
        `ip6tables -F ${chain}`,
        `ip6tables -A ${chain} -p tcp --dport 7411 -j ACCEPT`,
        `ip6tables -A ${chain} -j DROP`,
        `ip6tables -C INPUT -i br-fakenet01234 -m addrtype --dst-type LOCAL -j ${chain}`
      ])
    }).pipe(Effect.provide(unitLayer(paths, { docker: { networks: [lockedNetwork({ name: lockdownNetworkName(paths.config) })] } })))
  })

  it.effect("a chain already pinned to the port is left as it is (no flush, so no moment without the drop)", () => {
    const paths = tempPaths()
    writeFixture({ paths, gateway: { port: 7411, addrs: ["127.0.0.1", "172.30.0.1"] } })
    const chain = egressChainName(paths.config)
    const pinned = `-N ${chain}\n-A ${chain} -p tcp -m tcp --dport 7411 -j ACCEPT\n-A ${chain} -j DROP\n`
    return Effect.gen(function*() {
      yield* ensureLockdown(policy(true))
      const log = yield* Ref.get(yield* FirewallLog)
      expect(log.filter((l) => / -[NFA] /.test(l))).toEqual([])
    }).pipe(Effect.provide(unitLayer(paths, { firewallListing: (_t, args) => (args[0] === "-S" && args[1] === chain ? pinned : "") })))
  })

  it.effect("a changed gateway port: the next run rebuilds the chain for the new port", () => {
    const paths = tempPaths()
    writeFixture({ paths, gateway: { port: 7411, addrs: ["127.0.0.1", "172.30.0.1"] } })
    const chain = egressChainName(paths.config)
    const pinnedToOld = `-N ${chain}\n-A ${chain} -p tcp -m tcp --dport 7400 -j ACCEPT\n-A ${chain} -j DROP\n`
    return Effect.gen(function*() {
      yield* ensureLockdown(policy(true))
      const log = yield* Ref.get(yield* FirewallLog)
      expect(log).toContain(`iptables -F ${chain}`)
      expect(log).toContain(`iptables -A ${chain} -p tcp --dport 7411 -j ACCEPT`)
      expect(log.some((l) => l.includes("--dport 7400"))).toBe(false)
    }).pipe(Effect.provide(unitLayer(paths, { firewallListing: (_t, args) => (args[0] === "-S" && args[1] === chain ? pinnedToOld : "") })))
  })

  it.effect("egress_lockdown off removes this deployment's chain and its jumps, and touches no other deployment's", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const chain = egressChainName(paths.config)
    const table = [
      "-P INPUT ACCEPT",
      `-N ${chain}`,
      "-N ROSTER-0123456789",
      `-A INPUT -s 172.30.0.0/16 -m addrtype --dst-type LOCAL -j ${chain}`,
      `-A INPUT -s 172.31.0.0/16 -m addrtype --dst-type LOCAL -j ROSTER-0123456789`,
      `-A ${chain} -p tcp -m tcp --dport 7411 -j ACCEPT`
    ].join("\n")
    return Effect.gen(function*() {
      yield* ensureLockdown(policy(false))
      const log = yield* Ref.get(yield* FirewallLog)
      expect(log).toContain(`iptables -D INPUT -s 172.30.0.0/16 -m addrtype --dst-type LOCAL -j ${chain}`)
      expect(log).toContain(`iptables -X ${chain}`)
      expect(log.some((l) => l.includes("ROSTER-0123456789"))).toBe(false)
    }).pipe(Effect.provide(unitLayer(paths, { firewallListing: (_t, args) => (args.join(" ") === "-S" ? table : undefined) })))
  })

  it.effect("egress_lockdown off with nothing of it left costs one listing per tool, and removes nothing", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const other = ["-P INPUT ACCEPT", "-N ROSTER-0123456789", "-A INPUT -s 172.31.0.0/16 -m addrtype --dst-type LOCAL -j ROSTER-0123456789"].join("\n")
    return Effect.gen(function*() {
      yield* ensureLockdown(policy(false))
      expect([...(yield* Ref.get(yield* FirewallLog))].sort()).toEqual(["ip6tables -S", "iptables -S"])
    }).pipe(Effect.provide(unitLayer(paths, { firewallListing: (_t, args) => (args.join(" ") === "-S" ? other : undefined) })))
  })

  it.effect("egress_lockdown inserts the jump when it is missing", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    return Effect.gen(function*() {
      yield* ensureLockdown(policy(true))
      const log = yield* Ref.get(yield* FirewallLog)
      expect(log).toContain(`iptables -I INPUT -s 172.30.0.0/16 -m addrtype --dst-type LOCAL -j ${egressChainName(paths.config)}`)
    }).pipe(Effect.provide(unitLayer(paths, { firewall: (_tool, args) => args[0] !== "-C" })))
  })

  it.effect("egress_lockdown fails closed with the fix when iptables can't be used", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    return Effect.gen(function*() {
      const exit = yield* Effect.exit(ensureLockdown(policy(true)))
      expect(failureText(exit)).toContain("CAP_NET_ADMIN")
      expect(failureText(exit)).toContain("egress_lockdown = false")
    }).pipe(Effect.provide(unitLayer(paths, { firewall: () => false })))
  })

  it.effect("a removal of the chain the firewall refuses is said with the commands, and doctor --fix says it was not removed (never 'removed chain')", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const chain = egressChainName(paths.config)
    const said: Array<string> = []
    const logger = Logger.make(({ message }) => void said.push(String(message)))
    const listing = `-P INPUT ACCEPT\n-N ${chain}\n-A INPUT -s 172.30.0.0/16 -m addrtype --dst-type LOCAL -j ${chain}\n-A ${chain} -j DROP\n`
    return Effect.gen(function*() {
      const removal = yield* removeEgressLockdown(chain)
      expect(removal.failed).toEqual(expect.arrayContaining([`iptables -X ${chain}`, `iptables -D INPUT -s 172.30.0.0/16 -m addrtype --dst-type LOCAL -j ${chain}`]))
      expect(said.some((m) => m.includes(`the egress chain ${chain} was not removed whole`) && m.includes("run them as root"))).toBe(true)
      const done = yield* fixStale([{ deployment: null, network: null, chain: { name: chain, jumps: 1 }, daemon: null, stale: true }])
      expect(done).toEqual([expect.stringMatching(new RegExp(`^could not remove chain ${chain} whole: .*-X ${chain} failed`))])
    }).pipe(
      Effect.provide(Logger.replace(Logger.defaultLogger, logger)),
      Effect.provide(unitLayer(paths, { firewall: (_tool, args) => args[0] !== "-D" && args[0] !== "-X", firewallListing: () => listing }))
    )
  })

  it("the chain accepts the gateway port before it drops", () => {
    expect(egressChainRules(7300)).toEqual([["-p", "tcp", "--dport", "7300", "-j", "ACCEPT"], ["-j", "DROP"]])
  })
})

describe("where the gateway listens (--addr, [gateway] listen)", () => {
  const net = { id: "n", name: "roster-locked-x", driver: "bridge", internal: true, options: {}, subnets: [{ subnet: "172.30.7.0/24", gateway: "172.30.7.1" }], labels: {}, containers: 0 }

  it("by default loopback and the bridge; given, loopback and those, boxes at the first that is not loopback — refused naming the fix when boxes could not reach it", () => {
    expect(gatewayAddresses(undefined, net)).toEqual({ addrs: ["127.0.0.1", "172.30.7.1"], boxAddr: "172.30.7.1" })
    expect(gatewayAddresses(["172.30.7.250"], net)).toEqual({ addrs: ["127.0.0.1", "172.30.7.250"], boxAddr: "172.30.7.250" })
    expect(gatewayAddresses(["127.0.0.1", "172.30.7.1", "10.0.0.5"], net)).toEqual({ addrs: ["127.0.0.1", "172.30.7.1", "10.0.0.5"], boxAddr: "172.30.7.1" })
    const refused = (listen: Array<string>) => {
      const r = gatewayAddresses(listen, net)
      return r instanceof ListenRefused ? r.message : "accepted"
    }
    expect(refused(["127.0.0.2"])).toContain("only loopback is named (127.0.0.2), which no box can reach: add the locked network's bridge address (172.30.7.1)")
    expect(refused(["10.0.0.5"])).toContain("boxes on roster-locked-x (172.30.7.0/24) reach only addresses in that subnet, and 10.0.0.5 is not")
    // Every address at once, in any spelling, beside a good one or alone: refused for what it is, not for a port in use.
    for (const listen of [["0.0.0.0"], ["172.30.7.1", "0.0.0.0"], ["::"], ["[::]"], ["0:0:0:0:0:0:0:0"], ["::ffff:0.0.0.0"], ["0.0.0.0"], ["255.255.255.255"], ["224.0.0.1"], ["ff02::1"]]) {
      expect(refused(listen), listen.join(",")).toMatch(/is every address of this machine \(or none\).*roster server start --addr 172\.30\.7\.1/)
    }
    expect(refused(["172.30.7.1"])).toBe("accepted")
  })
})
