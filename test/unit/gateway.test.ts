import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema, Stream } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { drainTo } from "../../src/box/output.js"
import { OrgSchema } from "../../src/config/schema.js"
import { isRefusedAddress, isValidHost, normalizeHost } from "../../src/contract/addresses.js"
import { tokenFrom } from "../../src/gateway/base/identify.js"
import { compilePolicy } from "../../src/config/policy.js"
import type { Org } from "../../src/config/schema.js"
import { decide } from "../../src/gateway/policy/decide.js"
import { checkPolicy as checkOf, parseTarget } from "../../src/gateway/policy/policyCheck.js"
import { Refusal, refusalBody } from "../../src/gateway/base/refusal.js"
import { vetServerTools } from "../../src/gateway/policy/serverTools.js"
import * as NodeContext from "@effect/platform-node/NodeContext"

const org = Schema.decodeUnknownSync(OrgSchema)({
  allow: [
    { hosts: ["packages.example.org"], scope: ["org/*"] },
    { hosts: ["*.example.test"], scope: ["org/alice"], ports: [443, 8443] },
    { hosts: ["10.1.2.3"], scope: ["org"], ports: [80] }
  ]
})

/** The one decision on a CONNECT to host:port: allowed (with the addresses its entry names), or why not and the fix. */
const hostDecision = (o: Org, subject: string, host: string, port: number) => {
  const v = decide(compilePolicy(o), { subject, runId: null, worker: null, taskId: null }, { _tag: "Connect", host, port })
  if (v._tag === "Refuse") return { allowed: false, why: v.refusal.detail.why, reason: v.refusal.reason, fix: v.refusal.detail.fix }
  return { allowed: v._tag === "Tunnel" || v._tag === "Intercept", names: v._tag === "Tunnel" || v._tag === "Intercept" ? v.dial.names : [] }
}
const checkPolicy = (o: Org, subject: string, url: string) => checkOf(compilePolicy(o), subject, url)

describe("gateway policy", () => {
  it("denies by default and allows only matching host, port and subject", () => {
    expect(hostDecision(org, "org/alice", "packages.example.org", 443).allowed).toBe(true)
    expect(hostDecision(org, "org/alice", "Packages.EXAMPLE.org.", 443).allowed).toBe(true)
    expect(hostDecision(org, "org/alice", "packages.example.org", 80).allowed).toBe(false)
    expect(hostDecision(org, "org", "packages.example.org", 443).allowed).toBe(false)
    expect(hostDecision(org, "org/alice", "api.example.test", 8443).allowed).toBe(true)
    expect(hostDecision(org, "org/bob", "api.example.test", 443).allowed).toBe(false)
    expect(hostDecision(org, "org/alice", "example.test", 443).allowed).toBe(false)
    expect(hostDecision(org, "org/alice", "api.example.test.evil.test", 443).allowed).toBe(false)
    expect(hostDecision(org, "org/alice", "evil.test", 443).allowed).toBe(false)
  })

  it("a refusal says which kind it is and the org.toml lines that would change it", () => {
    const granted = Schema.decodeUnknownSync(OrgSchema)({
      grant: [{ name: "model", hosts: ["api.example.com"], scope: ["org/alice"], credential: "anthropic" }],
      allow: [{ hosts: ["*.example.test"], scope: ["org/alice"], ports: [443, 8443] }]
    })
    expect(hostDecision(granted, "org/alice", "evil.example.net", 8080)).toEqual({
      allowed: false, why: "no_rule", reason: expect.stringContaining("no [[grant]] or [[allow]]"),
      fix: ["[[allow]]", `hosts = ["evil.example.net"]`, "ports = [8080]", `scope = ["org/alice"]`]
    })
    expect(hostDecision(granted, "org/alice", "api.example.test", 9000)).toMatchObject({
      why: "wrong_port", fix: [`# in the [[allow]] for hosts = ["*.example.test"]:`, "ports = [443, 8443, 9000]"]
    })
    // Outside a grant's scope the fix widens the grant, never an [[allow]] that would skip the credential.
    expect(hostDecision(granted, "org/bob", "api.example.com", 443)).toMatchObject({
      why: "no_rule", fix: [`# in the [[grant]] named "model":`, `scope = ["org/alice","org/bob"]`]
    })
    const body = refusalBody(new Refusal(403, "nope", { why: "wrong_port", host: "h.example.test", port: 9, subject: "org/a", fix: ["ports = [9]"] }))
    expect(body).toEqual({
      type: "error",
      error: { type: "permission_error", message: "roster gateway: nope An operator could add to org.toml: ports = [9]" },
      roster: { why: "wrong_port", host: "h.example.test", port: 9, subject: "org/a", org_toml: ["ports = [9]"] }
    })
  })

  it("policy check reads URLs and CONNECT targets the way the gateway does", () => {
    expect(parseTarget("https://API.example.com/v1?x=1")).toEqual({ host: "api.example.com", port: 443, scheme: "https", path: "/v1?x=1" })
    expect(parseTarget("http://198.51.100.7:9080/")).toEqual({ host: "198.51.100.7", port: 9080, scheme: "http", path: "/" })
    expect(parseTarget("[2001:db8::1]:8443")).toEqual({ host: "2001:db8::1", port: 8443, scheme: "tunnel" })
    expect(parseTarget("ftp://example.com/")).toBeUndefined()
    expect(parseTarget("example.com")).toBeUndefined()
    const answer = checkPolicy(org, "org/alice", "https://packages.example.org/simple")
    expect(answer).toMatchObject({ allowed: true, how: "tunnelled", rule: `[[allow]] hosts = ["packages.example.org"]` })
    expect(answer.allowed && answer.notes[0]).toContain("resolved when the box asks")
    expect(checkPolicy(org, "org", "http://10.1.2.3/")).toMatchObject({ allowed: true, how: "forwarded", notes: [] })
    const self = Schema.decodeUnknownSync(OrgSchema)({ allow: [{ hosts: ["127.0.0.1"], scope: ["org/*"], ports: [7300] }] })
    expect(checkPolicy(self, "org/a", "127.0.0.1:7300")).toMatchObject({ allowed: false, status: 403, refusal: { detail: { why: "gateway_itself" } } })
    expect(checkPolicy(org, "org/a", "https://bad host/")).toMatchObject({ allowed: false, status: 400 })
  })

  it("finds provider-side tools by kind, in a request, its params or a batch, and nothing else", () => {
    const grant = (server_tools: Array<"web_search" | "web_fetch" | "code_execution" | "mcp"> = []) =>
      ({ name: "g", hosts: ["api.example.com"], scope: ["org/*"], credential: "anthropic", server_tools }) as const
    const kinds = (body: unknown, g = grant()) => {
      const v = vetServerTools(body, g)
      return v.ok ? [] : [...v.kinds].sort()
    }
    expect(kinds({ tools: [{ type: "web_search_20250305" }, { type: "web_fetch_20250910" }, { type: "code_execution_20250522" }] }))
      .toEqual(["code_execution", "web_fetch", "web_search"])
    // The OpenAI Responses names for the same things.
    expect(kinds({ tools: [{ type: "web_search_preview" }, { type: "code_interpreter" }, { type: "mcp", server_url: "https://x.test" }] }))
      .toEqual(["code_execution", "mcp", "web_search"])
    expect(kinds({ params: { mcp_servers: [{ url: "https://x.test" }] } })).toEqual(["mcp"])
    expect(kinds({ requests: [{ params: { tools: [{ type: "web_search_20250305" }] } }] })).toEqual(["web_search"])
    expect(kinds({ tools: [{ type: "custom", name: "web_search" }, { name: "bash" }], mcp_servers: [], messages: [{ type: "web_fetch_1" }] })).toEqual([])
    expect(kinds({ tools: [{ type: "web_search_20250305" }, { type: "code_execution_1" }] }, grant(["web_search"]))).toEqual(["code_execution"])
    expect(kinds("not an object")).toEqual([])
  })

  it("a rule names a private address only by listing it", () => {
    // A rule names an address by listing it: only a listed literal passes the private-address guard of a dial.
    expect(hostDecision(org, "org", "10.1.2.3", 80)).toMatchObject({ allowed: true, names: ["10.1.2.3"] })
    expect(hostDecision(org, "org/alice", "packages.example.org", 443)).toMatchObject({ allowed: true, names: [] })
  })

  it("refuses loopback, private, link-local, CGNAT, metadata and mapped forms", () => {
    for (const a of [
      "127.0.0.1", "127.9.9.9", "10.0.0.1", "172.16.0.1", "172.31.255.255", "192.168.1.1", "169.254.169.254", "100.64.0.1",
      "0.0.0.0", "::1", "::", "fe80::1", "fd00::1", "fd00:ec2::254", "::ffff:127.0.0.1", "::ffff:169.254.169.254",
      "::ffff:a9fe:a9fe", "0:0:0:0:0:ffff:7f00:1", "224.0.0.1", "not-an-ip"
    ]) expect(isRefusedAddress(a), a).toBe(true)
    for (const a of ["198.51.100.7", "93.184.216.34", "2606:4700::1111", "172.32.0.1"]) expect(isRefusedAddress(a), a).toBe(false)
  })

  it("normalises host names once and rejects ones that smuggle meaning", () => {
    expect(normalizeHost("API.Example.TEST.")).toBe("api.example.test")
    expect(normalizeHost("[::1]")).toBe("::1")
    for (const bad of ["a\0b", "a\r\nb", "user@host", "fe80::1%eth0", "", "a b", "a/b"]) expect(isValidHost(bad), bad).toBe(false)
    expect(isValidHost("api.anthropic.com")).toBe(true)
    expect(isValidHost("198.51.100.7")).toBe(true)
  })

  it("reads the run token from Proxy-Authorization Basic, never the password", () => {
    const b = (s: string) => `Basic ${Buffer.from(s).toString("base64")}`
    expect(tokenFrom({ "proxy-authorization": b("abc:x") })).toBe("abc")
    expect(tokenFrom({ "proxy-authorization": b("abc") })).toBe("abc")
    expect(tokenFrom({})).toBeUndefined()
    expect(tokenFrom({ "proxy-authorization": "Bearer zzz" })).toBe("")
  })
})

describe("the box's stdout", () => {
  it.effect("is drained even when the transcript file cannot be opened", () =>
    Effect.gen(function*() {
      let pulled = 0
      const stdout = Stream.range(1, 50).pipe(Stream.map((n) => {
        pulled = n
        return new TextEncoder().encode(`${n}\n`)
      }))
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "roster-drain-"))
      const blocked = path.join(dir, "is-a-dir")
      fs.mkdirSync(blocked)
      yield* drainTo(stdout, blocked)
      expect(pulled).toBe(50)
      const good = path.join(dir, "stdout.jsonl")
      yield* drainTo(Stream.make(new TextEncoder().encode("a\n"), new TextEncoder().encode("b\n")), good)
      expect(fs.readFileSync(good, "utf8")).toBe("a\nb\n")
    }).pipe(Effect.provide(NodeContext.layer)))
})

describe("watching the box's output", () => {
  it.effect("hands complete lines to the watcher as they arrive, across chunk boundaries", () =>
    Effect.gen(function*() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "roster-lines-"))
      const seen: Array<string> = []
      const enc = new TextEncoder()
      yield* drainTo(Stream.make(enc.encode("{\"a\":"), enc.encode("1}\n{\"b\""), enc.encode(":2}\nlast")), path.join(dir, "out"), { onLine: (l) =>
        Effect.sync(() => void seen.push(l)) })
      expect(seen).toEqual(["{\"a\":1}", "{\"b\":2}", "last"])
      expect(fs.readFileSync(path.join(dir, "out"), "utf8")).toBe("{\"a\":1}\n{\"b\":2}\nlast")
    }).pipe(Effect.provide(NodeContext.layer)))
})
