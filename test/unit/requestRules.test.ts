import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { decodeToml } from "../../src/config/decode.js"
import { patternCovers, rulesProblem } from "../../src/config/requestRule.js"
import { OrgSchema } from "../../src/config/schema.js"
import { ORG_TEMPLATE } from "../../src/config/template.js"
import { decisionRefusal, decisionsFor } from "../../src/contract/approval.js"
import { canonicalTarget } from "../../src/gateway/base/canonicalPath.js"
import { checkPolicy } from "../../src/gateway/base/policyCheck.js"
import { ruleRequest } from "../../src/gateway/base/requestRules.js"

// A GitHub-shaped grant: read the org's repositories, open pull requests, never delete.
const GITHUB = [
  "[[grant]]", `name = "github"`, `hosts = ["api.github.test"]`, `scope = ["org/*"]`, `credential = "github"`,
  "[[grant.rules]]", `methods = ["DELETE"]`, `action = "deny"`,
  "[[grant.rules]]", `methods = ["GET"]`, `paths = ["/repos/acme/**"]`, `action = "allow"`,
  "[[grant.rules]]", `methods = ["POST"]`, `paths = ["/repos/acme/*/pulls"]`, `action = "allow"`
].join("\n")
const org = (text: string) => Either.getOrThrow(decodeToml(OrgSchema, "org.toml", text))
const where = { host: "api.github.test", port: 443, subject: "org/alice" }
const github = org(GITHUB).grant[0]!
const decide = (method: string, url: string) => ruleRequest(github, method, url, where)

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
    const r = decide(method, url)
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
    ["GET", "", /no single meaning/]
  ])("%s %s is refused, naming what decided", (method, url, reason) => {
    const r = decide(method, url)
    expect(r.ok).toBe(false)
    if (!r.ok) expect(r.refusal.reason).toMatch(reason)
  })

  it("a refusal by the default says the rule that would allow it; a deny rule says no on purpose", () => {
    const byDefault = decide("PATCH", "/repos/acme/app")
    expect(!byDefault.ok && byDefault.refusal.detail).toMatchObject({
      why: "request_rule", host: "api.github.test", subject: "org/alice",
      fix: [`# a rule in the [[grant]] named "github":`, "[[grant.rules]]", `methods = ["PATCH"]`, `paths = ["/repos/acme/app"]`, `action = "allow"`]
    })
    const denied = decide("DELETE", "/repos/acme/app")
    expect(!denied.ok && denied.refusal.detail.fix).toBeUndefined()
  })

  it("the upstream gets the path the rules saw", () => {
    expect(decide("GET", "/repos/acme/x/../app?q=1")).toMatchObject({ ok: true, url: "/repos/acme/app?q=1" })
  })

  it("a grant without rules lets every request through as sent; default = \"deny\" alone refuses every one", () => {
    const plain = org(`[[grant]]\nname = "m"\nhosts = ["api.test"]\nscope = ["org/*"]\ncredential = "m"\n`).grant[0]!
    expect(ruleRequest(plain, "DELETE", "/a/../%2e%2e/b", where)).toEqual({ ok: true, url: "/a/../%2e%2e/b" })
    const closed = org(`[[grant]]\nname = "m"\nhosts = ["api.test"]\nscope = ["org/*"]\ncredential = "m"\ndefault = "deny"\n`).grant[0]!
    expect(ruleRequest(closed, "GET", "/", where).ok).toBe(false)
    const open = org(GITHUB.replace(`credential = "github"`, `credential = "github"\ndefault = "allow"`)).grant[0]!
    expect(ruleRequest(open, "GET", "/anything", where)).toMatchObject({ ok: true, by: "its default (allow: no rule matched)" })
    expect(ruleRequest(open, "DELETE", "/anything", where).ok).toBe(false)
  })
})

describe("a rule that asks", () => {
  const asking = org(GITHUB.replace(`methods = ["DELETE"]\naction = "deny"`, `methods = ["DELETE"]\npaths = ["/repos/acme/*"]\naction = "ask"`)).grant[0]!
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

describe("rules org.toml refuses", () => {
  it("the template's commented GitHub grant, uncommented, is a grant with three rules", () => {
    const block = ORG_TEMPLATE.split("# A grant that decides request by request")[1]?.split("\n\n")[0] ?? ""
    const toml = block.split("\n").filter((l) => /^# [a-z[]/.test(l)).map((l) => l.slice(2)).join("\n")
    const [grant] = org(toml).grant
    expect(grant?.rules?.map((r) => r.action)).toEqual(["deny", "allow", "allow"])
    expect(grant && ruleRequest(grant, "DELETE", "/repos/acme/app", where).ok).toBe(false)
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
    expect(problem(rule([`action = "allow"`, `graphql = true`]))).toMatch(/graphql/)
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
