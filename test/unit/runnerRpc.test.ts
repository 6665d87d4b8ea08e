import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import type * as os from "node:os"
import { fleetLines } from "../../src/cli/serverCommand.js"
import { freshPings } from "../../src/fleet/rpc/calls.js"
import type { NodeRow } from "../../src/fleet/nodes.js"
import { interfaceOf, listenProblem, peerProblem } from "../../src/fleet/rpc/peers.js"
import { RPC_SKEW_MS, signRequest, verifyRequest } from "../../src/fleet/rpc/sign.js"

const key = Buffer.alloc(32, 7)
const call = { method: "POST", path: "/v1/approvals/nudge", node: "node-b", body: "" }
const NOW = 1_800_000_000_000

const v4 = (address: string, cidr: string, internal = false): os.NetworkInterfaceInfo =>
  ({ address, cidr, family: "IPv4", internal, mac: "00:00:00:00:00:00", netmask: "255.255.0.0" })

/** A host as the daemon sees it: loopback, its own network, Docker's default bridge and a box network's bridge. */
const host = {
  lo: [v4("127.0.0.1", "127.0.0.1/8", true)],
  eth0: [v4("10.0.0.5", "10.0.0.5/24")],
  docker0: [v4("172.17.0.1", "172.17.0.1/16")],
  "br-0123456789ab": [v4("172.18.0.1", "172.18.0.1/16")],
  "roster-rpc0": [v4("203.0.113.10", "203.0.113.10/32")]
}

describe("the runner RPC's signature", () => {
  it("is accepted for the call it signs, within the clock window, and names its node", () => {
    const headers = signRequest(key, call, NOW)
    expect(verifyRequest(key, { ...call, headers }, NOW + 5_000)).toEqual({ node: "node-b" })
  })

  it("refuses another key, another path, another body, another node, a stale time, and none at all", () => {
    const headers = signRequest(key, call, NOW)
    expect(verifyRequest(Buffer.alloc(32, 8), { ...call, headers }, NOW)).toEqual({ refused: "its signature is not the fleet's key's" })
    expect(verifyRequest(key, { ...call, path: "/v1/node", headers }, NOW)).toHaveProperty("refused")
    expect(verifyRequest(key, { ...call, body: "{}", headers }, NOW)).toHaveProperty("refused")
    expect(verifyRequest(key, { ...call, headers: { ...headers, "x-roster-node": "node-c" } }, NOW)).toHaveProperty("refused")
    expect(verifyRequest(key, { ...call, headers }, NOW + RPC_SKEW_MS + 1)).toEqual({ refused: "its time is more than 60 s from this node's clock" })
    expect(verifyRequest(key, { ...call, headers: {} }, NOW)).toEqual({ refused: "not signed with the fleet's key" })
    expect(verifyRequest(key, { ...call, headers: { ...headers, "x-roster-signature": "ab" } }, NOW)).toHaveProperty("refused")
  })
})

describe("where the runner RPC may listen", () => {
  it("on this machine's own address, or its loopback", () => {
    expect(listenProblem("10.0.0.5", host)).toBeUndefined()
    expect(listenProblem("127.0.0.1", host)).toBeUndefined()
    expect(interfaceOf("::ffff:10.0.0.5", host)).toBe("eth0")
  })

  it("never on every address, a container bridge, or an address this machine does not hold", () => {
    expect(listenProblem("0.0.0.0", host)).toMatch(/every address of this machine, the box networks' among them/)
    expect(listenProblem("::", host)).toMatch(/every address/)
    expect(listenProblem("172.17.0.1", host)).toMatch(/on docker0, a container bridge/)
    expect(listenProblem("172.18.0.1", host)).toMatch(/on br-0123456789ab, a container bridge/)
    expect(listenProblem("10.0.0.99", host)).toBe("is not an address of this machine (of an interface that is up)")
  })
})

describe("who may connect to the runner RPC", () => {
  it("a peer on the listening interface's network, or a routed one", () => {
    expect(peerProblem("10.0.0.7", "eth0", host)).toBeUndefined()
    expect(peerProblem("192.0.2.40", "eth0", host)).toBeUndefined()
    expect(peerProblem("127.0.0.1", "lo", host)).toBeUndefined()
  })

  it("never a box: a peer on any other interface's network, whatever the bridge is called, as a dual-stack socket names it too", () => {
    expect(peerProblem("172.18.0.2", "eth0", host)).toMatch(/network of br-0123456789ab/)
    expect(peerProblem("::ffff:172.17.0.3", "eth0", host)).toMatch(/network of docker0/)
    expect(peerProblem("172.18.0.2", "roster-rpc0", host)).toMatch(/network of br-0123456789ab/)
    const renamed = { ...host, "roster-boxes": [v4("192.168.77.1", "192.168.77.1/24")] }
    expect(peerProblem("192.168.77.20", "eth0", renamed)).toMatch(/network of roster-boxes/)
  })
})

describe("server status's runner RPC part", () => {
  const base = {
    host: "h", pid: 1, version: "1", state: "up" as const, heartbeat_age_s: 1, boxes: 0, concurrency: 2, load: 0, skew_ms: 0, config_differs: []
  }
  it("a node that answered with its time, one that did not with why, one without an RPC with nothing", () => {
    const lines = fleetLines({
      node: "a", database: "db.test", reachable: true, detail: null, schema: 10,
      nodes: [
        { ...base, name: "a", advertise: "10.0.0.5:7310", rpc: { ok: true, ms: 2 } },
        { ...base, name: "b", advertise: "10.0.0.6:7310", rpc: { ok: false, detail: "cannot be reached (ECONNREFUSED)" } },
        { ...base, name: "c", advertise: null }
      ]
    })
    expect(lines[1]).toMatch(/ {2}rpc 10\.0\.0\.5:7310 2 ms$/)
    expect(lines[2]).toMatch(/ {2}rpc 10\.0\.0\.6:7310 NOT ANSWERING \(cannot be reached \(ECONNREFUSED\)\)$/)
    expect(lines[3]).not.toContain("rpc")
  })
})

describe("server status's pings", () => {
  it.effect("a node's answer stands for 5 s, then it is asked again; each node and address asked on its own", () =>
    Effect.gen(function*() {
      let asked = 0
      const ping = yield* freshPings(() => Effect.sync(() => ({ ok: true, ms: ++asked })))
      const row = (name: string, advertise: string) => ({ name, advertise } as NodeRow)
      expect(yield* ping(row("a", "10.0.0.5:7310"))).toEqual({ ok: true, ms: 1 })
      yield* TestClock.adjust("4 seconds")
      expect(yield* ping(row("a", "10.0.0.5:7310"))).toEqual({ ok: true, ms: 1 })
      expect(yield* ping(row("b", "10.0.0.6:7310"))).toEqual({ ok: true, ms: 2 })
      expect(yield* ping(row("a", "10.0.0.9:7310"))).toEqual({ ok: true, ms: 3 })
      yield* TestClock.adjust("2 seconds")
      expect(yield* ping(row("a", "10.0.0.5:7310"))).toEqual({ ok: true, ms: 4 })
    }))
})
