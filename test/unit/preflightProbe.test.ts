import { describe, expect, it } from "@effect/vitest"
import type * as os from "node:os"
import { preflightProbe, probeProblem, probeReport } from "../../src/box/preflightProbe.js"

const v4 = (address: string, cidr: string): os.NetworkInterfaceInfo => ({ address, netmask: "", family: "IPv4", mac: "00:00:00:00:00:00", internal: false, cidr })
/** This CI machine: its own network is TEST-NET-1 (192.0.2.2/24, its router 192.0.2.1). */
const ci = { lo: [{ ...v4("127.0.0.1", "127.0.0.1/8"), internal: true }], eth0: [v4("192.0.2.2", "192.0.2.2/24")], docker0: [v4("172.17.0.1", "172.17.0.1/16")] }

describe("the preflight's probe address is never this machine's own network", () => {
  it("unset, roster picks the first TEST-NET address on none of this machine's networks, and says which it passed over", () => {
    expect(preflightProbe(undefined, { lo: ci.lo })).toMatchObject({ probe: "192.0.2.1:443", chosen: true })
    expect(preflightProbe(undefined, ci)).toMatchObject({ probe: "198.51.100.1:443", chosen: true, passedOver: ["192.0.2.1"] })
    // A test's outside host on TEST-NET-2 as well: TEST-NET-3.
    expect(preflightProbe(undefined, { ...ci, veth0: [v4("198.51.100.1", "198.51.100.1/24")] }).probe).toBe("203.0.113.1:443")
    for (const iface of [{}, ci]) expect(probeProblem(preflightProbe(undefined, iface).probe, iface)).toBeUndefined()
  })

  it("an address the host reaches directly (its router, a neighbour), or one of its own, is named as unsafe with the fix; a person's choice is kept", () => {
    expect(probeProblem("192.0.2.1:443", ci)).toMatch(/192\.0\.2\.1 is on this machine's own network \(192\.0\.2\.2\/24 on eth0\), which the host reaches directly/)
    expect(probeProblem("192.0.2.2:443", ci)).toMatch(/192\.0\.2\.2 is this machine's own address \(eth0\)/)
    expect(probeProblem("203.0.113.1:443", ci)).toBeUndefined()
    const report = probeReport("192.0.2.1:443", ci)
    expect(report).toMatchObject({ probe: "192.0.2.1:443", chosen: false, safe: false })
    expect(report.why).toContain("set [box] preflight_probe to an address that answers nowhere")
    expect(probeReport(undefined, ci)).toMatchObject({ probe: "198.51.100.1:443", safe: true, why: expect.stringContaining("passed over 192.0.2.1") })
  })
})
