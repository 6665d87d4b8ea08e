import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Logger, Ref, TestClock } from "effect"
import { FirewallLog } from "../../src/box/Firewall.js"
import { egressChainRules } from "../../src/box/egressChain.js"
import { ensureLockdown } from "../../src/box/lockdown.js"
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
        name: "roster-locked",
        internal: true,
        options: { "com.docker.network.bridge.enable_icc": "false" }
      })
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
      expect(failureText(exit)).toContain("docker network rm roster-locked")
    }).pipe(Effect.provide(unitLayer(paths, { docker: { networks: [lockedNetwork({ internal: false })] } })))
  })

  it.effect("refuses an existing roster-locked that lets boxes reach each other", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    return Effect.gen(function*() {
      const exit = yield* Effect.exit(ensureLockdown(policy()))
      expect(failureText(exit)).toContain("reach each other")
    }).pipe(Effect.provide(unitLayer(paths, { docker: { networks: [lockedNetwork({ options: {} })] } })))
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
      expect(log).toEqual([
        "iptables -N ROSTER-LOCKED",
        "iptables -F ROSTER-LOCKED",
        "iptables -A ROSTER-LOCKED -p tcp --dport 7411 -j ACCEPT",
        "iptables -A ROSTER-LOCKED -j DROP",
        "iptables -C INPUT -s 172.30.0.0/16 -m addrtype --dst-type LOCAL -j ROSTER-LOCKED",
        "ip6tables -N ROSTER-LOCKED",
        "ip6tables -F ROSTER-LOCKED",
        "ip6tables -A ROSTER-LOCKED -p tcp --dport 7411 -j ACCEPT",
        "ip6tables -A ROSTER-LOCKED -j DROP",
        "ip6tables -C INPUT -i br-fakenet01234 -m addrtype --dst-type LOCAL -j ROSTER-LOCKED"
      ])
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.effect("egress_lockdown inserts the jump when it is missing", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    return Effect.gen(function*() {
      yield* ensureLockdown(policy(true))
      const log = yield* Ref.get(yield* FirewallLog)
      expect(log).toContain("iptables -I INPUT -s 172.30.0.0/16 -m addrtype --dst-type LOCAL -j ROSTER-LOCKED")
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

  it("the chain accepts the gateway port before it drops", () => {
    expect(egressChainRules(7300)).toEqual([["-p", "tcp", "--dport", "7300", "-j", "ACCEPT"], ["-j", "DROP"]])
  })
})
