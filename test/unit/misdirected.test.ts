import { describe, expect, it } from "@effect/vitest"
import { misdirection } from "../../src/gateway/policy/misdirected.js"

const caller = { subject: "org/alice", runId: "2026-12-07-09-00-00-0000a11c", worker: "alice", taskId: null }
const tunnel = (host: string, port: number) => ({ caller, host, port })

describe("a request inside a terminated tunnel names the tunnel's host, or it is refused", () => {
  it("the Host header in its canonical form: case, a trailing dot, the port (443 unnamed)", () => {
    const api = tunnel("api.example.com", 443)
    for (const host of ["api.example.com", "API.Example.COM", "api.example.com.", "api.example.com:443", " api.example.com "]) {
      expect(misdirection(api, host, "api.example.com"), host).toBeUndefined()
    }
    for (const host of ["tenant-b.example.com", "api.example.com:8443", "api.example.com.evil.test", "evil.test/api.example.com", "api.example.com:0",
      "api.example.com:99999", "api.example.com@evil.test", "", "api.example.com:443:443", "api.example.com, evil.test"]) {
      expect(misdirection(api, host, "api.example.com"), host).toMatch(/\(Host\) inside a tunnel to api\.example\.com$/)
    }
    expect(misdirection(api, undefined, undefined)).toMatch(/names no host/)
    const other = tunnel("api.example.com", 8443)
    expect(misdirection(other, "api.example.com:8443", undefined)).toBeUndefined()
    expect(misdirection(other, "api.example.com", undefined)).toMatch(/inside a tunnel to api\.example\.com:8443/)
  })

  it("an address's tunnel: the address, IPv6 in brackets", () => {
    expect(misdirection(tunnel("198.51.100.7", 8443), "198.51.100.7:8443", false)).toBeUndefined()
    expect(misdirection(tunnel("2001:db8::7", 443), "[2001:DB8::7]", false)).toBeUndefined()
    expect(misdirection(tunnel("2001:db8::7", 443), "[2001:db8::8]", false)).toMatch(/Host/)
  })

  it("the SNI the box sent, when it sent one, is the tunnel's host", () => {
    const api = tunnel("api.example.com", 443)
    expect(misdirection(api, "api.example.com", "API.example.com")).toBeUndefined()
    expect(misdirection(api, "api.example.com", "tenant-b.example.com")).toMatch(/"tenant-b\.example\.com" \(SNI\)/)
    // No SNI names no other host (a client sends none for an address).
    expect(misdirection(api, "api.example.com", false)).toBeUndefined()
  })
})
