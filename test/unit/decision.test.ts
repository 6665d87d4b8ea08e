import { Either } from "effect"
import fc from "fast-check"
import * as zlib from "node:zlib"
import { describe, expect, it } from "vitest"
import { decodeToml } from "../../src/config/decode.js"
import { compilePolicy, type Policy } from "../../src/config/policy.js"
import { OrgSchema } from "../../src/config/schema.js"
import type { Caller } from "../../src/gateway/base/identify.js"
import { headsOf } from "../../src/gateway/policy/asked.js"
import { decide } from "../../src/gateway/policy/decide.js"
import { candidatesFor } from "../../src/gateway/policy/requestRules.js"
import { checkPolicy } from "../../src/gateway/policy/policyCheck.js"
import type { Verdict } from "../../src/gateway/policy/verdict.js"

// The decision over a table: no listener, no socket — what the gateway and `roster policy check` both call.
const RUN: Caller = { subject: "org/alice", runId: "2026-12-07-09-00-00-0000a11c", worker: "alice", taskId: null }
const HOST: Caller = { subject: "org", runId: null, worker: null, taskId: null }

const policyOf = (...lines: ReadonlyArray<string>) => compilePolicy(Either.getOrThrow(decodeToml(OrgSchema, "org.toml", lines.join("\n"))))
const refusedToml = (...lines: ReadonlyArray<string>) => {
  const r = decodeToml(OrgSchema, "org.toml", lines.join("\n"))
  return Either.isLeft(r) ? r.left.message : "accepted"
}

// A GitHub-shaped grant: POST a pull request, read acme's repositories (their owner and name in any case, as GitHub
// reads them), never a secret repository; an MCP server by its calls; a GraphQL endpoint that reads only.
const GRANT = [
  "[[grant]]", `name = "github"`, `hosts = ["api.github.test"]`, `scope = ["org/*"]`, `credential = "github"`,
  "[[grant.rules]]", `paths = ["/repos/acme/secret/**"]`, `case = "insensitive"`, `action = "deny"`,
  "[[grant.rules]]", `methods = ["GET"]`, `paths = ["/repos/acme/**"]`, `case = "insensitive"`, `action = "allow"`,
  "[[grant.rules]]", `methods = ["POST"]`, `paths = ["/repos/acme/*/pulls"]`, `action = "allow"`,
  "[[grant.rules]]", `methods = ["DELETE"]`, `paths = ["/repos/acme/*/labels/*"]`, `action = "ask"`,
  "[[grant.rules]]", `paths = ["/mcp"]`, "jsonrpc = true", `calls = ["tools/call:write_file"]`, `action = "deny"`,
  "[[grant.rules]]", `paths = ["/mcp"]`, "jsonrpc = true", `action = "allow"`,
  "[[grant.rules]]", `paths = ["/graphql"]`, "graphql = true", `operations = ["query"]`, `action = "allow"`,
  "[[grant.rules]]", `paths = ["/events"]`, "websocket = true", `action = "allow"`
]
const ALLOWS = [
  "[[allow]]", `hosts = ["mirror.example.com"]`, `scope = ["org/*"]`, "ports = [443, 80]",
  "[[allow.rules]]", `methods = ["GET"]`, `paths = ["/pub/**"]`, `action = "allow"`,
  "[[allow]]", `hosts = ["plain.example.com"]`, `scope = ["org/*"]`, "ports = [443, 80]",
  "[[grant]]", `name = "model"`, `hosts = ["api.model.test"]`, `scope = ["org/*"]`, `credential = "anthropic"`
]
const policy = policyOf(...GRANT, ...ALLOWS)

interface Req {
  readonly method?: string
  readonly headers?: Record<string, string>
  readonly body?: Buffer | string
  readonly host?: string
  readonly port?: number
  readonly via?: "tls" | "plain"
  readonly upgrade?: boolean
  readonly caller?: Caller
}

/** One request as a listener reads it off the wire: its head (Host the tunnel's unless said), and its body once read. */
const ask = (p: Policy, target: string, r: Req = {}): Verdict => {
  const host = r.host ?? "api.github.test"
  const body = typeof r.body === "string" ? Buffer.from(r.body) : r.body
  // Names in lower case, as Node's parser gives them.
  const given = Object.fromEntries(Object.entries(r.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]))
  const headers = { host, ...(body ? { "content-length": String(body.length) } : {}), ...given }
  return decide(p, r.caller ?? RUN, {
    _tag: "Request", via: r.via ?? "tls", host, port: r.port ?? (r.via === "plain" ? 80 : 443), method: r.method ?? "GET", target,
    heads: headsOf(headers), sni: r.via === "plain" ? undefined : host, upgrade: r.upgrade ?? false, ...(body ? { body: { raw: body } } : {})
  })
}
const connect = (p: Policy, host: string, port = 443, caller = RUN) => decide(p, caller, { _tag: "Connect", host, port })

/** The verdict's kind, and for a refusal its status and why: what a row of the table expects. */
const kind = (v: Verdict) => (v._tag === "Refuse" ? `Refuse ${v.refusal.status} ${v.refusal.detail.why}` : v._tag)
const reason = (v: Verdict) => (v._tag === "Refuse" || v._tag === "Hold" ? v.refusal.reason : "")

describe("the one decision: each kind of verdict", () => {
  it("a CONNECT: intercepted for a grant or an allow with rules, tunnelled for an allow without, refused for the rest", () => {
    expect(connect(policy, "api.github.test")).toMatchObject({ _tag: "Intercept", entry: `[[grant]] "github"`, ruled: true, inject: { credential: "github" } })
    expect(connect(policy, "mirror.example.com")).toMatchObject({ _tag: "Intercept", inject: undefined, ruled: true })
    expect(connect(policy, "plain.example.com")).toMatchObject({ _tag: "Tunnel", entry: `[[allow]] hosts = ["plain.example.com"]` })
    expect(kind(connect(policy, "evil.example.net"))).toBe("Refuse 403 no_rule")
    expect(kind(connect(policy, "api.github.test", 8443))).toBe("Refuse 403 wrong_port")
    expect(kind(connect(policy, "bad host"))).toBe("Refuse 400 malformed")
  })

  it("a request: forwarded (the credential named), held by a rule that asks, its body asked for first, refused", () => {
    expect(ask(policy, "/repos/acme/app")).toMatchObject({ _tag: "Forward", url: "/repos/acme/app", inject: { credential: "github" }, by: expect.stringMatching(/^rule 2 /) })
    expect(ask(policy, "/repos/acme/app/labels/bug", { method: "DELETE" })).toMatchObject({
      _tag: "Hold", rule: expect.stringMatching(/^\[\[grant\]\] "github" rule 4 /), asked: { method: "DELETE", path: "/repos/acme/app/labels/bug" },
      then: { _tag: "Forward", url: "/repos/acme/app/labels/bug" }
    })
    expect(ask(policy, "/mcp", { method: "POST", headers: { "content-type": "application/json", "content-length": "40" } })).toMatchObject({ _tag: "ReadBody", why: "a rule reads its body" })
    expect(kind(ask(policy, "/orgs/acme"))).toBe("Refuse 403 request_rule")
    // A host-side caller has no run to hold: what a rule asks about is refused for it.
    expect(kind(ask(policy, "/repos/acme/app/labels/bug", { method: "DELETE", caller: { ...HOST, subject: "org/alice" } }))).toBe("Refuse 403 request_rule")
  })

  it("[gateway] approvals = \"ask\" holds a run's refused CONNECT, to go on as a tunnel once approved; a host caller's is refused", () => {
    const asking = policyOf(`[gateway]`, `approvals = "ask"`, ...ALLOWS)
    expect(connect(asking, "other.example.net")).toMatchObject({ _tag: "Hold", rule: undefined, asked: { method: "CONNECT", path: null }, then: { _tag: "Tunnel", host: "other.example.net" } })
    expect(kind(connect(asking, "other.example.net", 443, HOST))).toBe("Refuse 403 no_rule")
  })

  it("plain http: an allow's rules on the absolute URI's path; a grant's credential only over TLS; no upgrade", () => {
    expect(ask(policy, "/pub/a/../b", { via: "plain", host: "mirror.example.com" })).toMatchObject({ _tag: "Forward", url: "/pub/b", inject: undefined })
    expect(kind(ask(policy, "/private", { via: "plain", host: "mirror.example.com" }))).toBe("Refuse 403 request_rule")
    expect(ask(policy, "/x/../y", { via: "plain", host: "plain.example.com" })).toMatchObject({ _tag: "Forward", url: "/x/../y" })
    expect(kind(ask(policy, "/repos/acme/app", { via: "plain", port: 443 }))).toBe("Refuse 403 tls_only")
    expect(kind(ask(policy, "/pub/a", { via: "plain", host: "mirror.example.com", upgrade: true, headers: { upgrade: "websocket" } }))).toBe("Refuse 400 malformed")
  })

  it("inside a tunnel, a request for another host (Host, SNI) is refused before anything else is decided", () => {
    expect(kind(ask(policy, "/repos/acme/app", { headers: { host: "tenant-b.github.test" } }))).toBe("Refuse 421 misdirected")
  })

  it("an upgrade: a WebSocket where a websocket = true rule names it; h2c and every other protocol refused", () => {
    expect(ask(policy, "/events", { upgrade: true, headers: { upgrade: "websocket" } })).toMatchObject({ _tag: "Forward", upgrade: true })
    expect(kind(ask(policy, "/repos/acme/app", { upgrade: true, headers: { upgrade: "websocket" } }))).toBe("Refuse 403 request_rule")
    expect(kind(ask(policy, "/events", { upgrade: true, headers: { upgrade: "h2c" } }))).toBe("Refuse 400 malformed")
    expect(kind(ask(policy, "/events", { upgrade: true, headers: { upgrade: "TLS/1.2" } }))).toBe("Refuse 400 malformed")
  })
})

describe("no request with two meanings, on an entry with rules", () => {
  it.each([
    ["X-HTTP-Method-Override", "DELETE"], ["X-HTTP-Method", "DELETE"], ["X-Method-Override", "PATCH"], ["x-http-method-override", "GET"]
  ])("a POST with %s: %s where only POST is allowed is refused (the upstream would run the method it names)", (name, value) => {
    const v = ask(policy, "/repos/acme/app/pulls", { method: "POST", headers: { [name]: value } })
    expect(kind(v)).toBe("Refuse 400 ambiguous")
    expect(reason(v)).toMatch(/method-override header naming/)
  })

  it("an override that names the request's own method is one meaning: allowed", () => {
    expect(ask(policy, "/repos/acme/app/pulls", { method: "POST", headers: { "x-http-method-override": "post" } })._tag).toBe("Forward")
    expect(ask(policy, "/repos/acme/app/pulls?_method=POST", { method: "POST" })._tag).toBe("Forward")
  })

  it.each(["?_method=DELETE", "?_METHOD=delete", "?_method=POST&_method=DELETE"])("a POST to …/pulls%s is refused", (query) => {
    expect(kind(ask(policy, `/repos/acme/app/pulls${query}`, { method: "POST" }))).toBe("Refuse 400 ambiguous")
  })

  it.each([
    ["application/x-www-form-urlencoded", "title=x&_method=DELETE"],
    ["application/json", `{"title":"x","_method":"DELETE"}`],
    ["application/json", `{"title":"x","_METHOD":"delete"}`],
    ["multipart/form-data; boundary=XyZ", "--XyZ\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--XyZ--\r\n"],
    ["application/x-www-form-urlencoded", `{"_method":"DELETE"}`]
  ])("a POST whose %s body names another method is read first, then refused", (type, body) => {
    const unread = ask(policy, "/repos/acme/app/pulls", { method: "POST", headers: { "content-type": type, "content-length": String(body.length) } })
    expect(unread).toMatchObject({ _tag: "ReadBody", why: "its body could override its method" })
    expect(kind(ask(policy, "/repos/acme/app/pulls", { method: "POST", headers: { "content-type": type }, body }))).toBe("Refuse 400 ambiguous")
  })

  it("a POST's JSON body without _method is forwarded as read", () => {
    expect(ask(policy, "/repos/acme/app/pulls", { method: "POST", headers: { "content-type": "application/json" }, body: `{"title":"x"}` }))
      .toMatchObject({ _tag: "Forward", body: { raw: Buffer.from(`{"title":"x"}`), decoded: false } })
  })

  it.each(["X-Original-URL", "X-Rewrite-URL"])("a GET with %s naming a path no rule allows is refused", (name) => {
    const v = ask(policy, "/repos/acme/app", { headers: { [name]: "/orgs/evil/members" } })
    expect(kind(v)).toBe("Refuse 400 ambiguous")
    expect(reason(v)).toMatch(new RegExp(`a ${name.toLowerCase()} header`))
  })

  it.each(["/repos/acme/..;/..;/orgs/evil", "/repos/acme/app;jsessionid=x", "/repos/acme/app%3Bx", "/repos/acme/.;/app"])("%s (a ';' in a segment) is refused", (path) => {
    const v = ask(policy, path)
    expect(kind(v)).toBe("Refuse 400 ambiguous")
    expect(reason(v)).toMatch(/";" in a path segment/)
  })

  it("a GET or HEAD with a body is refused", () => {
    expect(kind(ask(policy, "/repos/acme/app", { headers: { "content-length": "2" } }))).toBe("Refuse 400 ambiguous")
    expect(kind(ask(policy, "/repos/acme/app", { method: "GET", headers: { "transfer-encoding": "chunked" } }))).toBe("Refuse 400 ambiguous")
  })

  it("a path's case: a rule that says the upstream ignores case matches any case, and its deny cannot be dodged by one", () => {
    expect(ask(policy, "/repos/ACME/App")).toMatchObject({ _tag: "Forward", by: expect.stringMatching(/^rule 2 /) })
    const dodge = ask(policy, "/repos/ACME/Secret/contents/x")
    expect(kind(dodge)).toBe("Refuse 403 request_rule")
    expect(reason(dodge)).toMatch(/rule 1 \(paths = \["\/repos\/acme\/secret\/\*\*"\], case = "insensitive", action = "deny"\)/)
    // What ** matches is never compared: a ref keeps its case; a rule without case counts it.
    expect(ask(policy, "/repos/acme/app/git/refs/heads/Main")).toMatchObject({ _tag: "Forward", url: "/repos/acme/app/git/refs/heads/Main" })
    expect(kind(ask(policy, "/repos/ACME/app/pulls", { method: "POST" }))).toBe("Refuse 403 request_rule")
  })

  it("org.toml refuses a deny that counts case where a later allow says the upstream ignores it, and case without paths", () => {
    const grant = ["[[grant]]", `name = "g"`, `hosts = ["api.test"]`, `scope = ["org/*"]`, `credential = "g"`]
    expect(refusedToml(...grant,
      "[[grant.rules]]", `paths = ["/repos/acme/secret/**"]`, `action = "deny"`,
      "[[grant.rules]]", `methods = ["GET"]`, `paths = ["/repos/acme/**"]`, `case = "insensitive"`, `action = "allow"`))
      .toMatch(/rule 1 .* counts case, but rule 2 .* says the upstream ignores it on paths they share: add case = "insensitive" to rule 1/)
    expect(refusedToml(...grant, `default = "allow"`,
      "[[grant.rules]]", `paths = ["/a/**"]`, `case = "insensitive"`, `action = "ask"`,
      "[[grant.rules]]", `paths = ["/b/**"]`, `action = "deny"`))
      .toMatch(/rule 2 .* counts case, but rule 1 .* says the upstream ignores it and the default allows the rest/)
    expect(refusedToml(...grant, "[[grant.rules]]", `case = "insensitive"`, `action = "allow"`)).toMatch(/case applies to a rule's paths/)
    // Paths the two do not share: nothing to dodge.
    expect(refusedToml(...grant,
      "[[grant.rules]]", `paths = ["/orgs/**"]`, `action = "deny"`,
      "[[grant.rules]]", `paths = ["/repos/**"]`, `case = "insensitive"`, `action = "allow"`)).toBe("accepted")
  })
})

const gql = (target: string, r: Req = {}) => ask(policy, target, { method: "POST", headers: { "content-type": "application/json" }, ...r })

describe("a GraphQL request with one reading only", () => {
  it.each([
    ["a query allowed", "/graphql?query=query%7Ba%7D", "GET", undefined, "Forward"],
    ["two query parameters", "/graphql?query=query%7Ba%7D&query=mutation%7Bb%7D", "GET", undefined, "Refuse 400 ambiguous"],
    ["query and Query", "/graphql?query=query%7Ba%7D&Query=mutation%7Bb%7D", "GET", undefined, "Refuse 400 ambiguous"],
    ["operationName twice", "/graphql?query=query%7Ba%7D&operationName=A&operationName=B", "GET", undefined, "Refuse 400 ambiguous"],
    ["a POST whose URL names an operation as well", "/graphql?query=query%7Ba%7D", "POST", `{"query":"mutation { b }"}`, "Refuse 400 ambiguous"],
    ["a JSON body with query twice", "/graphql", "POST", `{"query":"query { a }","query":"mutation { b }"}`, "Refuse 400 ambiguous"],
    ["a JSON body with Query beside query", "/graphql", "POST", `{"query":"query { a }","Query":"mutation { b }"}`, "Refuse 400 ambiguous"],
    ["a JSON body with an escaped second query", "/graphql", "POST", `{"query":"query { a }","\\u0071uery":"mutation { b }"}`, "Refuse 400 ambiguous"],
    ["variables twice", "/graphql", "POST", `{"query":"query { a }","variables":{},"Variables":{}}`, "Refuse 400 ambiguous"],
    ["a JSON body allowed", "/graphql", "POST", `{"query":"query Q { a }","variables":{"Query":1,"query":2}}`, "Forward"]
  ])("%s", (_what, target, method, body, expected) => {
    expect(kind(gql(target, { method, ...(body ? { body } : { headers: {} }) }))).toBe(expected)
  })

  it("a GET with a body, a body declared a form or not at all, or declared GraphQL and JSON, is refused", () => {
    expect(kind(gql("/graphql?query=query%7Ba%7D", { method: "GET", body: "{}" }))).toBe("Refuse 400 ambiguous")
    expect(reason(gql("/graphql", { headers: { "content-type": "application/x-www-form-urlencoded" }, body: "query=query%7Ba%7D" }))).toMatch(/declared application\/x-www-form-urlencoded/)
    expect(reason(gql("/graphql", { headers: {}, body: `{"query":"query { a }"}` }))).toMatch(/no declared type/)
    expect(reason(gql("/graphql", { headers: { "content-type": "application/graphql" }, body: `{"query":"query { a }"}` }))).toMatch(/declared application\/graphql that is JSON/)
    expect(gql("/graphql", { headers: { "content-type": "application/graphql" }, body: "query { a }" })._tag).toBe("Forward")
  })
})

const rpc = (body: string | Buffer, headers: Record<string, string> = {}) =>
  ask(policy, "/mcp", { method: "POST", headers: { "content-type": "application/json", ...headers }, body })

describe("a JSON-RPC (MCP) request with one reading only", () => {
  const call = (name: string) => `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"${name}","arguments":{}}}`

  it.each([
    ["method twice", `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"write_file"}}`],
    ["Method beside method", `{"jsonrpc":"2.0","id":1,"method":"tools/list","Method":"tools/call","params":{"name":"write_file"}}`],
    ["METHOD alone", `{"jsonrpc":"2.0","id":1,"METHOD":"tools/call","params":{"name":"write_file"}}`],
    ["params twice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file"},"params":{"name":"write_file"}}`],
    ["params.name twice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","name":"write_file"}}`],
    ["params.Name beside name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","Name":"write_file"}}`],
    ["a batch call's method twice", `[${call("read_file")},{"jsonrpc":"2.0","id":2,"method":"tools/list","method":"tools/call","params":{"name":"write_file"}}]`]
  ])("%s is refused", (_what, body) => {
    expect(kind(rpc(body))).toBe("Refuse 400 ambiguous")
  })

  it("one call of each: read allowed, write refused by its rule; a body not declared JSON refused", () => {
    expect(rpc(call("read_file"))._tag).toBe("Forward")
    expect(kind(rpc(call("write_file")))).toBe("Refuse 403 request_rule")
    expect(reason(ask(policy, "/mcp", { method: "POST", headers: { "content-type": "text/plain" }, body: call("read_file") }))).toMatch(/declared text\/plain/)
  })

  it("a compressed body is decided as decoded and sent decoded; past the body limit, or in a coding roster cannot read, refused", () => {
    const gz = zlib.gzipSync(Buffer.from(call("write_file")))
    expect(kind(rpc(gz, { "content-encoding": "gzip" }))).toBe("Refuse 403 request_rule")
    expect(rpc(zlib.brotliCompressSync(Buffer.from(call("read_file"))), { "content-encoding": "br" }))
      .toMatchObject({ _tag: "Forward", body: { raw: Buffer.from(call("read_file")), decoded: true } })
    const small = policyOf(`[gateway]`, `max_body_mib = 0.001`, ...GRANT)
    const bomb = zlib.gzipSync(Buffer.from(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"${"x".repeat(100_000)}"}}`))
    const over = ask(small, "/mcp", { method: "POST", headers: { "content-type": "application/json", "content-encoding": "gzip" }, body: bomb })
    expect(kind(over)).toBe("Refuse 413 malformed")
    expect(reason(rpc(gz, { "content-encoding": "compress" }))).toMatch(/content-encoding roster cannot read \(compress\)/)
    expect(reason(rpc(Buffer.from(call("read_file")), { "content-encoding": "gzip" }))).toMatch(/does not decode as its content-encoding says/)
  })
})

describe("what stays as it was", () => {
  it.each([
    ["/repos/acme%2Fsecret", /encoded slash/], ["/repos/acme%5Cx", /encoded backslash/], ["/repos/acme/%00", /control character/], ["/a%zz", /malformed escape/]
  ])("%s is refused (%s)", (path, why) => {
    expect(kind(ask(policy, path))).toBe("Refuse 400 ambiguous")
    expect(reason(ask(policy, path))).toMatch(why)
  })

  it("dot-segments and repeated slashes are resolved, and the upstream gets the path decided", () => {
    expect(ask(policy, "//repos/acme/x/../app//pulls", { method: "POST" })).toMatchObject({ _tag: "Forward", url: "/repos/acme/app/pulls" })
    expect(kind(ask(policy, "/repos/acme/secret/../../acme/%2e%2e/orgs"))).toBe("Refuse 403 request_rule")
  })

  it("an entry without rules sends what the box sent: none of these checks is its to make", () => {
    expect(ask(policy, "/v1/messages;x?_method=DELETE", { host: "api.model.test", method: "POST", headers: { "x-http-method-override": "DELETE" } }))
      .toMatchObject({ _tag: "Forward", url: "/v1/messages;x?_method=DELETE", inject: { credential: "anthropic" } })
  })
})

describe("roster policy check is the same decision", () => {
  it("says the verdict's fields, for a request it is given whole", () => {
    const answer = checkPolicy(policy, "org/alice", "https://api.github.test/repos/acme/app/pulls", { method: "POST", headers: ["X-HTTP-Method-Override: DELETE"] })
    expect(answer).toMatchObject({ allowed: false, status: 400, verdict: { kind: "refuse", why: "ambiguous" } })
    expect(checkPolicy(policy, "org/alice", "https://api.github.test/repos/ACME/app")).toMatchObject({
      allowed: true, how: "terminated", credential: "github", verdict: { kind: "forward", url: "/repos/ACME/app", injects: "github", entry: `[[grant]] "github"` }
    })
    expect(checkPolicy(policy, "org/alice", "https://api.github.test/mcp", { method: "POST", headers: ["Content-Type: application/json"] }))
      .toMatchObject({ allowed: true, verdict: { kind: "read_body" }, request: expect.stringMatching(/decided by its body/) })
    expect(checkPolicy(policy, "org/alice", "https://api.github.test/mcp", {
      method: "POST", headers: ["Content-Type: application/json"], body: Buffer.from(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_file"}}`)
    })).toMatchObject({ allowed: false, verdict: { kind: "refuse", why: "request_rule" } })
  })
})

describe("an entry's rules, indexed by their first segment", () => {
  // A reference matcher with no index: every rule, every pattern, segment by segment.
  const naive = (pattern: string, path: ReadonlyArray<string>, fold: boolean) => {
    const p = pattern.slice(1).split("/")
    const eq = (a: string, b: string) => (fold ? a.toLowerCase() === b.toLowerCase() : a === b)
    for (let i = 0; i < p.length; i++) {
      if (p[i] === "**") return path.length > i
      if (path[i] === undefined || (p[i] === "*" ? path[i] === "" : !eq(p[i] as string, path[i] as string))) return false
    }
    return path.length === p.length
  }
  const SEG = ["a", "A", "b", "*", "**", ""] as const
  const patternArb = fc.array(fc.constantFrom(...SEG), { minLength: 1, maxLength: 3 })
    .filter((s) => s.every((x, i) => x !== "**" || i === s.length - 1) && s.every((x, i) => x !== "" || i === s.length - 1))
    .map((s) => `/${s.join("/")}`)
  const ruleArb = fc.record({
    methods: fc.option(fc.subarray(["GET", "POST"], { minLength: 1 }), { nil: undefined }),
    paths: fc.option(fc.array(patternArb, { minLength: 1, maxLength: 2 }), { nil: undefined }),
    fold: fc.boolean()
  })

  it("finds exactly the rules a request could match, in order, as a matcher that looks at every rule does", () => {
    fc.assert(fc.property(fc.array(ruleArb, { minLength: 1, maxLength: 8 }), fc.constantFrom("GET", "POST"), fc.array(fc.constantFrom("a", "A", "b", "c", ""), { maxLength: 4 }), (rules, method, segs) => {
      const toml = ["[[allow]]", `hosts = ["x.test"]`, `scope = ["org/*"]`, `default = "deny"`, ...rules.flatMap((r) => [
        "[[allow.rules]]", ...(r.methods ? [`methods = ${JSON.stringify(r.methods)}`] : []), ...(r.paths ? [`paths = ${JSON.stringify(r.paths)}`] : []),
        ...(r.paths && r.fold ? [`case = "insensitive"`] : []), `action = "allow"`
      ])].join("\n")
      const decoded = decodeToml(OrgSchema, "org.toml", toml)
      fc.pre(Either.isRight(decoded))
      if (!Either.isRight(decoded)) return
      const compiled = compilePolicy(decoded.right).entries[0]?.rules
      if (!compiled) throw new Error("an entry with rules compiles to rules")
      const path = segs.length === 0 ? [""] : segs
      const want = compiled.rules.filter((r) =>
        !r.websocket && (r.methods === undefined || r.methods.has(method)) &&
        (r.rule.paths === undefined || r.rule.paths.some((p) => naive(p, path, r.fold))))
      expect(candidatesFor(compiled, method, path, false).map((r) => r.text)).toEqual(want.map((r) => r.text))
    }), { numRuns: 2000, seed: 6302 })
  })
})
