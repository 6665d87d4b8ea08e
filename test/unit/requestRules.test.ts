import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { decodeToml } from "../../src/config/decode.js"
import { compilePolicy, type Policy } from "../../src/config/policy.js"
import { patternCovers, rulesProblem } from "../../src/config/requestRule.js"
import { OrgSchema } from "../../src/config/schema.js"
import { ORG_TEMPLATE } from "../../src/config/template.js"
import { decisionRefusal, decisionsFor } from "../../src/contract/approval.js"
import { plainHeads } from "../../src/gateway/policy/asked.js"
import { canonicalTarget } from "../../src/gateway/policy/canonicalPath.js"
import { decide } from "../../src/gateway/policy/decide.js"
import { checkPolicy as checkOf, probeBody } from "../../src/gateway/policy/policyCheck.js"
import type { Refusal } from "../../src/gateway/base/refusal.js"

// A GitHub-shaped grant: read the org's repositories, open pull requests, never delete.
const GITHUB = [
  "[[grant]]", `name = "github"`, `hosts = ["api.github.test"]`, `scope = ["org/*"]`, `credential = "github"`,
  "[[grant.rules]]", `methods = ["DELETE"]`, `action = "deny"`,
  "[[grant.rules]]", `methods = ["GET"]`, `paths = ["/repos/acme/**"]`, `action = "allow"`,
  "[[grant.rules]]", `methods = ["POST"]`, `paths = ["/repos/acme/*/pulls"]`, `action = "allow"`
].join("\n")
const org = (text: string) => Either.getOrThrow(decodeToml(OrgSchema, "org.toml", text))
const policyOf = (text: string) => compilePolicy(org(text))
const where = { host: "api.github.test", port: 443, subject: "org/alice" }
const CALLER = { subject: "org/alice", runId: "2026-12-07-09-00-00-0000a11c", worker: "alice", taskId: null }

type Ruled =
  | { readonly ok: true; readonly url: string; readonly by?: string | undefined }
  | { readonly ok: false; readonly refusal: Refusal; readonly ask?: { rule: string | undefined; method: string; path: string | null; url: string }; readonly needsBody?: true }

/**
 * The one decision on a request inside a tunnel to `at` (its Host and SNI the tunnel's), in the words these
 * tests were first written in: let through on a URL by a rule, refused, held (asked), or waiting for its body.
 */
const ruleRequest = (
  policy: Policy, method: string, url: string, at: { host: string; port: number } = where,
  body?: { contentType: string; raw: Buffer }, upgrade = false
): Ruled => {
  const heads = { ...plainHeads(at.host), ...(body ? { contentType: body.contentType, hasBody: body.raw.length > 0 } : {}), upgrade: upgrade ? "websocket" : undefined }
  const v = decide(policy, CALLER, {
    _tag: "Request", via: "tls", host: at.host, port: at.port, method, target: url, heads, sni: at.host, upgrade, ...(body ? { body: { raw: body.raw } } : {})
  })
  switch (v._tag) {
    case "Forward":
      return { ok: true, url: v.url, by: v.by }
    case "Refuse":
      return { ok: false, refusal: v.refusal }
    case "Hold":
      return { ok: false, refusal: v.refusal, ask: { rule: v.rule, method: v.asked.method, path: v.asked.path, url: v.then._tag === "Forward" ? v.then.url : "" } }
    case "ReadBody":
      return { ok: false, refusal: undefined as unknown as Refusal, needsBody: true }
    default:
      throw new Error(`a request was decided as ${v._tag}`)
  }
}
const github = policyOf(GITHUB)
const decide_ = (method: string, url: string) => ruleRequest(github, method, url)
const checkPolicy = (o: ReturnType<typeof org>, subject: string, url: string, method = "GET", body?: { raw: Buffer; contentType: string }, websocket = false) =>
  checkOf(compilePolicy(o), subject, url, { method, websocket, ...(body ? { body: body.raw, headers: [`Content-Type: ${body.contentType}`] } : {}) })
const probe = (o: Parameters<typeof probeBody>[0]) => {
  const raw = probeBody(o)
  return raw ? { raw, contentType: "application/json" } : undefined
}

describe("a request's canonical path", () => {
  it.each([
    ["/", "/", "/"],
    ["/repos/acme/../x", "/repos/x", "/repos/x"],
    ["/repos/acme/%2e%2e/x", "/repos/x", "/repos/x"],
    ["/repos/acme/%2E%2E/%2e/x", "/repos/x", "/repos/x"],
    ["//repos//acme///app", "/repos/acme/app", "/repos/acme/app"],
    ["/repos/acme/app/", "/repos/acme/app/", "/repos/acme/app/"],
    ["/repos/acme/app?per_page=1&x=../../y", "/repos/acme/app", "/repos/acme/app?per_page=1&x=../../y"],
    ["/Repos/ACME", "/Repos/ACME", "/Repos/ACME"],
    ["/../../etc", "/etc", "/etc"],
    ["/caf%C3%A9/a%20b", "/café/a b", "/caf%C3%A9/a%20b"],
    ["/a%3Fb", "/a?b", "/a%3Fb"],
    ["/%41", "/A", "/A"]
  ])("%s is %s to the rules and %s to the upstream", (raw, path, url) => {
    expect(canonicalTarget(raw)).toEqual({ ok: true, path, url })
  })

  it.each([
    ["/repos/acme%2Fapp", /encoded slash/],
    ["/repos/acme%2fapp", /encoded slash/],
    ["/a%5Cb", /encoded backslash/],
    ["/a\\b", /backslash/],
    ["/a%00b", /control character/],
    ["/a%0d%0a", /control character/],
    ["/a%zz", /malformed escape/],
    ["/a%2", /malformed escape/],
    ["/%C3", /not UTF-8/],
    ["", /not a path/],
    ["*", /not a path/],
    ["https://api.github.test/repos", /not a path/],
    ["/a#b", /fragment/]
  ])("%s has no single meaning: refused", (raw, why) => {
    const c = canonicalTarget(raw)
    expect(c.ok).toBe(false)
    if (!c.ok) expect(c.why).toMatch(why)
  })

  it("a 64 KiB path is made canonical like a short one", () => {
    const long = `/${"a/./b/../".repeat(7282)}end`
    expect(long.length).toBeGreaterThan(64 * 1024)
    expect(canonicalTarget(long)).toMatchObject({ ok: true, path: `/${"a/".repeat(7282)}end` })
  })
})

describe("a grant's request rules", () => {
  it.each([
    ["GET", "/repos/acme/app", "rule 2"],
    ["GET", "/repos/acme/app/pulls/1", "rule 2"],
    ["GET", "/repos/acme/", "rule 2"],
    ["POST", "/repos/acme/app/pulls", "rule 3"],
    ["POST", "/repos/acme/app/pulls?draft=1", "rule 3"],
    ["POST", "//repos/acme/app//pulls", "rule 3"]
  ])("%s %s is allowed by %s", (method, url, rule) => {
    const r = decide_(method, url)
    expect(r.ok).toBe(true)
    if (r.ok) expect(r.by).toMatch(new RegExp(`^${rule} `))
  })

  it.each([
    ["DELETE", "/repos/acme/app", /by \[\[grant\]\] "github" rule 1 \(methods = \["DELETE"\], action = "deny"\)/],
    ["GET", "/repos/acme", /its default \(deny: no rule matched\)/],
    ["GET", "/repos/other/app", /its default/],
    ["GET", "/repos/acme/../other/app", /GET \/repos\/other\/app .*its default/],
    ["GET", "/repos/acme/%2e%2e/other/app", /GET \/repos\/other\/app .*its default/],
    ["GET", "/Repos/acme/app", /its default/],
    ["get", "/repos/acme/app", /get \/repos\/acme\/app .*its default/],
    ["POST", "/repos/acme/app/pulls/1", /its default/],
    ["POST", "/repos/acme//pulls", /its default/],
    ["PURGE", "/repos/acme/app", /its default/],
    ["GET", "", /not a path/]
  ])("%s %s is refused, naming what decided", (method, url, reason) => {
    const r = decide_(method, url)
    expect(r.ok).toBe(false)
    if (!r.ok) expect(r.refusal.reason).toMatch(reason)
  })

  it("a refusal by the default says the rule that would allow it; a deny rule says no on purpose", () => {
    const byDefault = decide_("PATCH", "/repos/acme/app")
    expect(!byDefault.ok && byDefault.refusal.detail).toMatchObject({
      why: "request_rule", host: "api.github.test", subject: "org/alice",
      fix: [`# a rule in the [[grant]] named "github":`, "[[grant.rules]]", `methods = ["PATCH"]`, `paths = ["/repos/acme/app"]`, `action = "allow"`]
    })
    const denied = decide_("DELETE", "/repos/acme/app")
    expect(!denied.ok && denied.refusal.detail.fix).toBeUndefined()
  })

  it("decides a request the same the first time, again, and after a thousand other paths have come and gone", () => {
    const first = decide_("POST", "/repos/acme/app/pulls")
    expect(decide_("POST", "/repos/acme/app/pulls")).toEqual(first)
    for (let i = 0; i < 1000; i++) decide_("GET", `/repos/acme/r${i}`)
    expect(decide_("POST", "/repos/acme/app/pulls")).toEqual(first)
    expect(decide_("DELETE", "/repos/acme/app/pulls").ok).toBe(false)
    expect(decide_("GET", `/repos/acme/${"x/".repeat(400)}y`)).toMatchObject({ ok: true, by: expect.stringMatching(/^rule 2 /) })
  })

  it("the upstream gets the path the rules saw", () => {
    expect(decide_("GET", "/repos/acme/x/../app?q=1")).toMatchObject({ ok: true, url: "/repos/acme/app?q=1" })
  })

  it("a grant without rules lets every request through as sent; default = \"deny\" alone refuses every one", () => {
    const api = { host: "api.test", port: 443 }
    const plain = policyOf(`[[grant]]\nname = "m"\nhosts = ["api.test"]\nscope = ["org/*"]\ncredential = "m"\n`)
    expect(ruleRequest(plain, "DELETE", "/a/../%2e%2e/b", api)).toEqual({ ok: true, url: "/a/../%2e%2e/b" })
    const closed = policyOf(`[[grant]]\nname = "m"\nhosts = ["api.test"]\nscope = ["org/*"]\ncredential = "m"\ndefault = "deny"\n`)
    expect(ruleRequest(closed, "GET", "/", api).ok).toBe(false)
    const open = policyOf(GITHUB.replace(`credential = "github"`, `credential = "github"\ndefault = "allow"`))
    expect(ruleRequest(open, "GET", "/anything", where)).toMatchObject({ ok: true, by: "its default (allow: no rule matched)" })
    expect(ruleRequest(open, "DELETE", "/anything", where).ok).toBe(false)
  })
})

describe("a rule that asks", () => {
  const asking = policyOf(GITHUB.replace(`methods = ["DELETE"]\naction = "deny"`, `methods = ["DELETE"]\npaths = ["/repos/acme/*"]\naction = "ask"`))
  it("holds the request it matches, naming the rule, with the canonical path the upstream gets once approved", () => {
    const r = ruleRequest(asking, "DELETE", "/repos/acme/x/../app", where)
    expect(r).toMatchObject({
      ok: false,
      ask: { rule: `[[grant]] "github" rule 1 (methods = ["DELETE"], paths = ["/repos/acme/*"], action = "ask")`, method: "DELETE", path: "/repos/acme/app", url: "/repos/acme/app" }
    })
    expect(!r.ok && r.refusal.reason).toMatch(/is held for a person by \[\[grant\]\] "github" rule 1/)
    // Not matched by the asking rule: the default refuses, nothing is held.
    const other = ruleRequest(asking, "DELETE", "/repos/other/app", where)
    expect(other.ok).toBe(false)
    expect("ask" in other).toBe(false)
  })

  it("a held request of a rule takes once or deny only; one held by a refusal takes all four", () => {
    expect(decisionsFor({ rule: "[[grant]] \"github\" rule 1 (…)" })).toEqual(["once", "deny"])
    expect(decisionsFor({})).toEqual(["once", "run", "always", "deny"])
    expect(decisionRefusal({ id: "ap-00000000", rule: "[[grant]] \"github\" rule 1 (…)" }, "always")).toMatch(/approve it once \(roster approve ap-00000000\) or deny it/)
    expect(decisionRefusal({ id: "ap-00000000", rule: "r" }, "once")).toBeUndefined()
  })

  it("roster policy check says asked, and by which rule", () => {
    expect(checkPolicy(org(GITHUB.replace(`action = "deny"`, `action = "ask"`)), "org/alice", "https://api.github.test/repos/acme/app", "DELETE")).toMatchObject({
      allowed: true, asked: true, request: expect.stringMatching(/^DELETE \/repos\/acme\/app asked: held until a person approves it .*rule 1/)
    })
  })
})

describe("GraphQL operations", () => {
  const GQL = policyOf([
    "[[grant]]", `name = "gh-graphql"`, `hosts = ["api.github.test"]`, `scope = ["org/*"]`, `credential = "github"`,
    "[[grant.rules]]", `methods = ["POST"]`, `paths = ["/graphql"]`, "graphql = true", `operations = ["query"]`, `action = "allow"`,
    "[[grant.rules]]", `methods = ["POST"]`, `paths = ["/graphql"]`, "graphql = true", `operations = ["mutation:CreateIssue"]`, `action = "ask"`
  ].join("\n"))
  const post = (doc: unknown, type = "application/json") => ruleRequest(GQL, "POST", "/graphql", where, { contentType: type, raw: Buffer.from(typeof doc === "string" ? doc : JSON.stringify(doc)) })

  it("a GraphQL rule waits for the body; without one the request is not decided", () => {
    const unread = decide(GQL, CALLER, {
      _tag: "Request", via: "tls", host: where.host, port: 443, method: "POST", target: "/graphql", upgrade: false, sni: where.host,
      heads: { ...plainHeads(where.host), contentType: "application/json", hasBody: true }
    })
    expect(unread).toMatchObject({ _tag: "ReadBody", limit: 32 * 1024 * 1024, why: "a rule reads its body" })
    // With no body at all there is nothing to wait for: no document, refused.
    expect(ruleRequest(GQL, "POST", "/graphql", where)).toMatchObject({ ok: false, refusal: { status: 400 } })
  })

  it.each([
    [{ query: "{ viewer { login } }" }, "allow", /rule 1/],
    [{ query: "query Q { a: viewer { mutation: login } }" }, "allow", /rule 1/],
    [{ query: "query mutation { x }" }, "allow", /rule 1/],
    [{ query: "fragment F on User { id } query Q { viewer { ...F } }" }, "allow", /rule 1/],
    [{ query: "mutation CreateIssue($t: String = \"query\") { createIssue(title: $t) { id } }", operationName: "CreateIssue" }, "ask", /rule 2/],
    [{ query: "mutation DeleteRepo { deleteRepository { id } }" }, "deny", /its default/],
    [{ query: "subscription S { x }" }, "deny", /its default/],
    ["query Q { x }", "allow", /rule 1/]
  ])("%j is %s", (doc, action, by) => {
    const r = post(doc, typeof doc === "string" ? "application/graphql" : "application/json")
    if (action === "allow") expect(r).toMatchObject({ ok: true, by: expect.stringMatching(by) })
    else if (action === "ask") expect(!r.ok && r.ask?.rule).toMatch(by)
    else expect(!r.ok && r.refusal.status === 403 && r.refusal.reason).toMatch(by)
  })

  it.each([
    [{ query: "query A { x } mutation B { y }" }, /2 operations/],
    [{ extensions: { persistedQuery: { version: 1, sha256Hash: "ab".repeat(32) } } }, /persisted query/],
    [[{ query: "{ x }" }, { query: "{ y }" }], /batch of GraphQL operations/],
    [{ query: "query Q { x" }, /braces do not close/],
    ["{not json", /not JSON/]
  ])("%j has no single operation: refused (400), never guessed", (doc, why) => {
    const r = post(doc)
    expect(!r.ok && r.refusal.status).toBe(400)
    expect(!r.ok && r.refusal.reason).toMatch(why)
  })
})

describe("JSON-RPC calls (an MCP server over HTTP)", () => {
  const MCP = policyOf([
    "[[grant]]", `name = "mcp"`, `hosts = ["mcp.example.test"]`, `scope = ["org/*"]`, `credential = "mcp"`,
    "[[grant.rules]]", `paths = ["/mcp"]`, "jsonrpc = true", `calls = ["tools/call:write_file"]`, `action = "deny"`,
    "[[grant.rules]]", `paths = ["/mcp"]`, "jsonrpc = true", `calls = ["initialize", "notifications/initialized", "tools/list", "tools/call"]`, `action = "allow"`
  ].join("\n"))
  const mcp = { host: "mcp.example.test", port: 443 }
  const call = (method: string, params?: unknown, id: number | undefined = 1) => ({ jsonrpc: "2.0", ...(id === undefined ? {} : { id }), method, ...(params ? { params } : {}) })
  const send = (body: unknown) => ruleRequest(MCP, "POST", "/mcp", mcp, { contentType: "application/json", raw: Buffer.from(JSON.stringify(body)) })

  it("decides each call by its method, and an MCP tool call by its tool", () => {
    expect(send(call("tools/list")).ok).toBe(true)
    expect(send(call("tools/call", { name: "read_file", arguments: {} })).ok).toBe(true)
    expect(send(call("notifications/initialized", undefined, undefined)).ok).toBe(true)
    const refused = send(call("tools/call", { name: "write_file", arguments: { path: "/x" } }))
    expect(!refused.ok && refused.refusal.reason).toMatch(/call tools\/call:write_file\) on .* by \[\[grant\]\] "mcp" rule 1/)
    expect(!send(call("resources/read")).ok).toBe(true)
  })

  it("a batch is decided call by call and refused whole if any call is", () => {
    expect(send([call("tools/list"), call("tools/call", { name: "read_file" }, 2)]).ok).toBe(true)
    const r = send([call("tools/list"), call("tools/call", { name: "write_file" }, 2)])
    expect(!r.ok && r.refusal.reason).toMatch(/a batch of 2 calls: its call tools\/call:write_file/)
  })

  it.each([
    [{ jsonrpc: "2.0", id: 1 }, /not a JSON-RPC call/],
    [[], /empty JSON-RPC batch/],
    [call("tools/call", { arguments: {} }), /names no tool/]
  ])("%j is refused (400)", (body, why) => {
    const r = send(body)
    expect(!r.ok && r.refusal.status).toBe(400)
    expect(!r.ok && r.refusal.reason).toMatch(why)
  })

  it("roster policy check decides a call given with --jsonrpc", () => {
    const o = org([
      "[[grant]]", `name = "mcp"`, `hosts = ["mcp.example.test"]`, `scope = ["org/*"]`, `credential = "mcp"`,
      "[[grant.rules]]", `paths = ["/mcp"]`, "jsonrpc = true", `calls = ["tools/call:write_file"]`, `action = "deny"`,
      "[[grant.rules]]", `paths = ["/mcp"]`, "jsonrpc = true", `action = "allow"`
    ].join("\n"))
    const refused = checkPolicy(o, "org/alice", "https://mcp.example.test/mcp", "POST", probe({ jsonrpc: "tools/call:write_file" }))
    expect(refused.allowed).toBe(false)
    expect(checkPolicy(o, "org/alice", "https://mcp.example.test/mcp", "POST", probe({ jsonrpc: "tools/list" }))).toMatchObject({ allowed: true })
    expect(checkPolicy(o, "org/alice", "https://mcp.example.test/mcp", "POST")).toMatchObject({ allowed: true, request: expect.stringMatching(/decided by its body/) })
  })
})

describe("rules org.toml refuses", () => {
  it("the template's commented MCP grant, uncommented, refuses write_file and allows read_file", () => {
    const block = ORG_TEMPLATE.split("# An MCP server over HTTP")[1]?.split("\n\n")[0] ?? ""
    const toml = block.split("\n").filter((l) => /^# (\[|[a-z_]+ = )/.test(l)).map((l) => l.slice(2)).join("\n")
    const grant = policyOf(toml)
    const call = (name: string) => ({ contentType: "application/json", raw: Buffer.from(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name } })) })
    const at = { host: org(toml).grant[0]?.hosts[0] ?? "", port: 443 }
    expect(ruleRequest(grant, "POST", "/mcp", at, call("write_file")).ok).toBe(false)
    expect(ruleRequest(grant, "POST", "/mcp", at, call("read_file")).ok).toBe(true)
  })

  it("the template's commented GitHub grant, uncommented, is a grant with four rules, its upgrade only on events", () => {
    const block = ORG_TEMPLATE.split("# A grant that decides request by request")[1]?.split("\n\n")[0] ?? ""
    const toml = block.split("\n").filter((l) => /^# (\[|[a-z_]+ = )/.test(l)).map((l) => l.slice(2)).join("\n")
    const [grant] = org(toml).grant
    expect(grant?.rules?.map((r) => r.action)).toEqual(["deny", "allow", "allow", "allow"])
    const at = { host: grant?.hosts[0] ?? "", port: 443 }
    expect(ruleRequest(policyOf(toml), "DELETE", "/repos/acme/app", at).ok).toBe(false)
    expect(ruleRequest(policyOf(toml), "GET", "/repos/acme/app/events", at, undefined, true).ok).toBe(true)
    expect(ruleRequest(policyOf(toml), "GET", "/repos/acme/app", at, undefined, true).ok).toBe(false)
    // Owner and repository in any case, as GitHub reads them.
    expect(ruleRequest(policyOf(toml), "GET", "/repos/ACME/App/git/refs/heads/Main", at)).toMatchObject({ ok: true, url: "/repos/ACME/App/git/refs/heads/Main" })
  })

  it("the template's commented [[allow]] with rules, uncommented, is intercepted and reads /pub only", () => {
    const block = ORG_TEMPLATE.split("# An [[allow]] with rules")[1]?.split("\n\n")[0] ?? ""
    const toml = block.split("\n").filter((l) => /^# (\[|[a-z_]+ = )/.test(l)).map((l) => l.slice(2)).join("\n")
    const o = org(toml)
    expect(checkPolicy(o, "org/alice", "https://mirror.example.com/pub/x", "HEAD")).toMatchObject({ allowed: true, how: "intercepted" })
    expect(checkPolicy(o, "org/alice", "https://mirror.example.com/admin").allowed).toBe(false)
  })

  const problem = (rules: string) => {
    const r = decodeToml(OrgSchema, "org.toml", `[[grant]]\nname = "g"\nhosts = ["api.test"]\nscope = ["org/*"]\ncredential = "g"\n${rules}`)
    if (Either.isRight(r)) throw new Error("expected org.toml to be refused")
    return r.left.message
  }
  const rule = (lines: ReadonlyArray<string>) => ["[[grant.rules]]", ...lines].join("\n")

  it.each([
    [`paths = ["repos/acme"]`, /can never match — a path starts with "\/"/],
    [`paths = ["/repos/../acme"]`, /can never match — ".." never appears/],
    [`paths = ["/repos//acme"]`, /can never match — "\/\/" never appears/],
    [`paths = ["/repos/**/pulls"]`, /"\*\*" is allowed only as the last segment/],
    [`paths = ["/repos/ac*"]`, /"\*" stands for a whole segment/],
    [`paths = ["/repos/acme?x=1"]`, /no query/],
    [`paths = ["/repos/acme%2Fx"]`, /written decoded/]
  ])("%s: never matches", (line, why) => {
    expect(problem(rule([line, `action = "allow"`]))).toMatch(why)
  })

  it("a rule an earlier one shadows, with the fix", () => {
    const text = problem([rule([`paths = ["/repos/**"]`, `action = "allow"`]), rule([`methods = ["DELETE"]`, `paths = ["/repos/acme/*"]`, `action = "deny"`])].join("\n"))
    expect(text).toMatch(/grant\.0\.rules\.1|rules/)
    expect(text).toMatch(/grant "g": rule 2 \(methods = \["DELETE"\], paths = \["\/repos\/acme\/\*"\], action = "deny"\) never decides: rule 1 .* matches every request it matches/)
    expect(text).toMatch(/move it above, narrow the earlier one, or remove it/)
  })

  it("an action other than allow or deny, and a key rules do not have, are refused", () => {
    expect(problem(rule([`action = "maybe"`]))).toMatch(/action/)
    expect(problem(rule([`action = "allow"`, `upgrade = true`]))).toMatch(/upgrade/)
  })

  it("a websocket = true rule takes paths only, and neither shadows nor is shadowed by a rule for plain requests", () => {
    expect(problem(rule([`methods = ["GET"]`, "websocket = true", `action = "allow"`]))).toMatch(/a WebSocket upgrade is a GET: a websocket = true rule takes paths, not methods/)
    expect(problem(rule([`paths = ["/graphql"]`, "graphql = true", "websocket = true", `action = "allow"`]))).toMatch(/reads no body/)
    expect(rulesProblem([{ paths: ["/**"], action: "allow" }, { paths: ["/stream"], websocket: true, action: "allow" }])).toBeUndefined()
    expect(rulesProblem([{ paths: ["/**"], websocket: true, action: "deny" }, { paths: ["/stream"], action: "allow" }])).toBeUndefined()
    expect(rulesProblem([{ paths: ["/**"], websocket: true, action: "deny" }, { paths: ["/stream"], websocket: true, action: "allow" }])?.message).toMatch(/rule 2 .* never decides: rule 1/)
  })

  it.each([
    ["/**", "/", true],
    ["/**", "/a/b", true],
    ["/a/**", "/a", false],
    ["/a/**", "/a/b/**", true],
    ["/a/*", "/a/**", false],
    ["/a/*/c", "/a/b/c", true],
    ["/a/*/c", "/a/*/c", true],
    ["/a/b", "/a/*", false],
    ["/a/", "/a", false]
  ])("%s covers %s: %s", (outer, inner, covers) => {
    expect(patternCovers(outer, inner)).toBe(covers)
  })

  it("operations and calls say what they read; a GraphQL rule after one that allows every body of its path never decides", () => {
    expect(problem(rule([`operations = ["mutation"]`, `action = "deny"`]))).toMatch(/operations apply to a rule with graphql = true/)
    expect(problem(rule([`calls = ["tools/list"]`, `action = "deny"`]))).toMatch(/calls apply to a rule with jsonrpc = true/)
    expect(problem(rule([`graphql = true`, `jsonrpc = true`, `action = "deny"`]))).toMatch(/not both/)
    expect(problem(rule([`operations = ["mutate"]`, `graphql = true`, `action = "deny"`]))).toMatch(/an operation is "query", "mutation" or "subscription"/)
    expect(problem([rule([`paths = ["/graphql"]`, `action = "allow"`]), rule([`paths = ["/graphql"]`, "graphql = true", `operations = ["mutation"]`, `action = "deny"`])].join("\n")))
      .toMatch(/rule 2 .* never decides: rule 1/)
    expect(problem([rule([`paths = ["/graphql"]`, "graphql = true", `operations = ["mutation"]`, `action = "deny"`]), rule([`paths = ["/graphql"]`, "graphql = true", `operations = ["mutation:CreateIssue"]`, `action = "allow"`])].join("\n")))
      .toMatch(/rule 2 .* never decides: rule 1/)
    expect(rulesProblem([
      { paths: ["/graphql"], graphql: true, operations: ["mutation:CreateIssue"], action: "allow" },
      { paths: ["/graphql"], graphql: true, operations: ["mutation"], action: "deny" }
    ])).toBeUndefined()
  })

  it("rules that overlap without one covering the other are kept", () => {
    expect(rulesProblem([
      { methods: ["GET"], paths: ["/repos/acme/**"], action: "allow" },
      { methods: ["GET", "POST"], paths: ["/repos/acme/*/pulls"], action: "deny" }
    ])).toBeUndefined()
  })
})

describe("roster policy check with a method", () => {
  const o = org(GITHUB)
  it("says which rule allows a request, and refuses one a rule refuses, sending nothing", () => {
    expect(checkPolicy(o, "org/alice", "https://api.github.test/repos/acme/app/pulls", "POST")).toMatchObject({
      allowed: true, rule: `[[grant]] "github"`, request: expect.stringMatching(/^POST \/repos\/acme\/app\/pulls allowed by rule 3 /)
    })
    const refused = checkPolicy(o, "org/alice", "https://api.github.test/repos/acme/app", "DELETE")
    expect(refused.allowed).toBe(false)
    if (!refused.allowed) expect(refused.refusal.reason).toMatch(/rule 1/)
    // The path as written, not as new URL would resolve it: the gateway's canonical form decides.
    const up = checkPolicy(o, "org/alice", "https://api.github.test/repos/acme/%2e%2e/other")
    expect(up.allowed).toBe(false)
    expect(checkPolicy(o, "org/alice", "api.github.test:443")).toMatchObject({ allowed: true, request: expect.stringMatching(/each request is decided/) })
  })
})

describe("a WebSocket upgrade", () => {
  const WS = GITHUB.replace(`credential = "github"`, `credential = "github"\ndefault = "allow"`) +
    ["", "[[grant.rules]]", `paths = ["/stream/*"]`, "websocket = true", `action = "allow"`, "[[grant.rules]]", `paths = ["/ask/*"]`, "websocket = true", `action = "ask"`].join("\n")
  const ws = policyOf(WS)
  const upgrade = (url: string) => ruleRequest(ws, "GET", url, where, undefined, true)

  it("is let through by a websocket = true rule that matches its path, on its canonical path", () => {
    expect(upgrade("/stream/../stream/live")).toMatchObject({ ok: true, url: "/stream/live", by: expect.stringMatching(/^rule 4 .*websocket = true/) })
  })

  it("is refused where no websocket rule matches — a GET rule and the entry's default allow do not turn a REST grant into a tunnel — with the rule that would", () => {
    const r = upgrade("/repos/acme/app")
    expect(r.ok).toBe(false)
    if (r.ok) return
    expect(r.refusal.status).toBe(403)
    expect(r.refusal.reason).toMatch(/a WebSocket upgrade on \/repos\/acme\/app on api\.github\.test is refused for org\/alice by \[\[grant\]\] "github" \(an upgrade is let through only by a rule that names it: websocket = true\)/)
    expect(r.refusal.detail.fix).toEqual([`# a rule in the [[grant]] named "github":`, "[[grant.rules]]", `paths = ["/repos/acme/app"]`, "websocket = true", `action = "allow"`])
    // The same path as a plain GET is allowed by rule 2: the upgrade is decided apart.
    expect(ruleRequest(ws, "GET", "/repos/acme/app", where).ok).toBe(true)
  })

  it("a websocket rule never matches a plain request; an asking one holds the upgrade for a person", () => {
    expect(ruleRequest(ws, "GET", "/stream/live", where)).toMatchObject({ ok: true, by: "its default (allow: no rule matched)" })
    expect(upgrade("/ask/x")).toMatchObject({ ok: false, ask: { rule: expect.stringMatching(/^\[\[grant\]\] "github" rule 5 /), path: "/ask/x" } })
  })

  it("a grant without rules lets an upgrade through as before rules existed", () => {
    const plain = policyOf(`[[grant]]\nname = "m"\nhosts = ["api.test"]\nscope = ["org/*"]\ncredential = "m"\n`)
    expect(ruleRequest(plain, "GET", "/socket", { host: "api.test", port: 443 }, undefined, true).ok).toBe(true)
  })

  it("roster policy check --websocket says it", () => {
    const o = org(WS)
    expect(checkPolicy(o, "org/alice", "https://api.github.test/stream/live", "GET", undefined, true)).toMatchObject({
      allowed: true, request: expect.stringMatching(/^a WebSocket upgrade on \/stream\/live allowed by rule 4/)
    })
    expect(checkPolicy(o, "org/alice", "https://api.github.test/repos/acme/app", "GET", undefined, true).allowed).toBe(false)
  })
})

describe("an [[allow]] with rules", () => {
  const ALLOW = [
    "[[allow]]", `hosts = ["mirror.example.com"]`, `scope = ["org/*"]`, `ports = [443, 80]`,
    "[[allow.rules]]", `methods = ["GET", "HEAD"]`, `paths = ["/pub/**"]`, `action = "allow"`,
    "[[allow.rules]]", `methods = ["PUT"]`, `paths = ["/pub/*"]`, `action = "ask"`
  ].join("\n")
  const o = org(ALLOW)
  const allow = compilePolicy(o)
  const at = { host: "mirror.example.com", port: 443, subject: "org/alice" }

  it("decides request by request, naming the [[allow]] by its hosts, with its own fix lines", () => {
    expect(ruleRequest(allow, "GET", "/pub/a/b", at)).toMatchObject({ ok: true, by: expect.stringMatching(/^rule 1 /) })
    const refused = ruleRequest(allow, "POST", "/pub/a", at)
    expect(!refused.ok && refused.refusal.reason).toMatch(/POST \/pub\/a on mirror\.example\.com is refused for org\/alice by \[\[allow\]\] hosts = \["mirror\.example\.com"\] its default \(deny/)
    expect(!refused.ok && refused.refusal.detail.fix).toEqual([
      `# a rule in the [[allow]] for hosts = ["mirror.example.com"]:`, "[[allow.rules]]", `methods = ["POST"]`, `paths = ["/pub/a"]`, `action = "allow"`
    ])
    expect(ruleRequest(allow, "PUT", "/pub/a", at)).toMatchObject({ ok: false, ask: { rule: expect.stringMatching(/^\[\[allow\]\] hosts = \["mirror\.example\.com"\] rule 2/) } })
  })

  it("is intercepted, not tunnelled, in roster policy check; plain http is decided by the same rules", () => {
    expect(checkPolicy(o, "org/alice", "https://mirror.example.com/pub/x")).toMatchObject({ allowed: true, how: "intercepted", request: expect.stringMatching(/allowed by rule 1/) })
    expect(checkPolicy(o, "org/alice", "http://mirror.example.com/pub/x", "DELETE").allowed).toBe(false)
    expect(checkPolicy(o, "org/alice", "http://mirror.example.com/pub/x")).toMatchObject({ allowed: true, how: "forwarded" })
    const plain = org(`[[allow]]\nhosts = ["example.com"]\nscope = ["org/*"]\n`)
    expect(checkPolicy(plain, "org/alice", "https://example.com/anything", "DELETE")).toMatchObject({ allowed: true, how: "tunnelled" })
  })

  it("org.toml refuses an [[allow]] rule that never decides, naming the allow", () => {
    const r = decodeToml(OrgSchema, "org.toml", ALLOW + "\n[[allow.rules]]\nmethods = [\"GET\"]\npaths = [\"/pub/x\"]\naction = \"deny\"\n")
    expect(Either.isLeft(r) && r.left.message).toMatch(/allow for hosts = \["mirror\.example\.com"\]: rule 3 .* never decides: rule 1/)
  })
})
