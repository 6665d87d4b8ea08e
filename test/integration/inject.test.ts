import { MemoryStore } from "../../src/memory/MemoryStore.js"
import { testEngine } from "../support/harness.js"
import { SpendLedger } from "../../src/spend/SpendLedger.js"
import { RunFence } from "../../src/run/RunFence.js"
import { RunLog, type RunRecord } from "../../src/run/RunLog.js"
import { TaskStore } from "../../src/task/TaskStore.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Effect, Exit, Layer, Scope } from "effect"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { SENTINEL } from "../../src/contract/constants.js"
import { sentinelJwt } from "../../src/box/sentinel.js"
import { OrgConfig } from "../../src/config/OrgConfig.js"
import { layout, Paths } from "../../src/config/Paths.js"
import { Audit } from "../../src/gateway/base/Audit.js"
import { Dialer } from "../../src/gateway/base/Dialer.js"
import { LiveRuns } from "../../src/gateway/base/LiveRuns.js"
import { serveGateway } from "../../src/gateway/server.js"
import { serveRehearsal } from "../../src/rehearsal/server.js"
import { Vault } from "../../src/vault/Vault.js"
import { makeOutsideHost, type OutsideHost } from "../support/netns.js"
import { makeTestTls } from "../support/testCa.js"
import { auditedOnce } from "../support/audit.js"
import type { AuditRecord } from "../../src/gateway/base/Audit.js"
import { connectVia, forwardVia, keptAlive, rawVia, type Reply, reportPreflight, tlsHandshakeVia, viaGateway, wsVia } from "../support/boxClient.js"
import type { Org } from "../../src/config/schema.js"
import { checkPolicy } from "../../src/gateway/policy/policyCheck.js"
import { compilePolicy } from "../../src/config/policy.js"

const REAL_KEY = "sk-ant-api03-REAL-injected-key-7f3a9c"
const REAL_GIT = "ghp_REALgitTOKEN0123456789"
const ALICE = "a1".repeat(32)
const BOB = "b2".repeat(32)
const CAROL = "c4".repeat(32)
/** A second run of alice's, with a record of its own: its taints are one test's alone (a run keeps only so many). */
const ALICE_WS = "a3".repeat(32)
/** Runs of their own for model calls on one kept-alive connection (budgets in their worker.toml). */
const DAVE = "d5".repeat(32)
const ERIN = "e6".repeat(32)
const DAVE_RUN = "2026-12-01-09-00-00-0000da01"
const ERIN_RUN = "2026-12-01-09-00-00-0000e401"
/** A run whose worker's budget is lowered while its connection is busy. */
const FRAN = "f7".repeat(32)
const FRAN_RUN = "2026-12-01-09-00-00-0000f4a1"
/** Runs of gil's charged to one chat channel with a daily budget (GIL, GIL_TOO), and one charged to none (GIL_SOLO). */
const GIL = "a8".repeat(32)
const GIL_TOO = "a9".repeat(32)
const GIL_SOLO = "aa".repeat(32)
const GIL_RUN = "2026-12-01-09-00-00-0000c6a1"
const GIL_TOO_RUN = "2026-12-01-09-00-00-0000c6a2"
const GIL_SOLO_RUN = "2026-12-01-09-00-00-0000c6a3"
/** A run of ivy's, whose model answers in zstd. */
const IVY = "ac".repeat(32)
const IVY_RUN = "2026-12-01-09-00-00-00000172"
/** A run of hank's: a request for another host inside a tunnel taints it. */
const HANK = "ab".repeat(32)
const HANK_RUN = "2026-12-01-09-00-00-0000ba1c"
/** A run of jo's, for raw bytes a well-behaved client never sends (its audit lines apart from the other tests'). */
const JO = "ad".repeat(32)
const JO_RUN = "2026-12-01-09-00-00-00000f0f"
const sha = (s: string) => crypto.createHash("sha256").update(s).digest("hex")

describe("the gateway injects credentials in transit (real TLS upstream in a test network namespace)", () => {
  let outside: OutsideHost
  let scope: Scope.CloseableScope
  let port: number
  let rosterCa: string
  let testCa: string
  let auditDir: string
  let orgFile: string
  let franToml: string
  let org: Org
  let readRun: (worker: string, runId: string) => Promise<RunRecord | undefined>
  const live = new Set(["2026-12-01-09-00-00-0000a11c", "2026-12-01-09-00-00-00000b0b", "2026-12-01-09-00-00-0000ca01", "2026-12-01-09-00-00-0000a11d", DAVE_RUN, ERIN_RUN, FRAN_RUN, GIL_RUN, GIL_TOO_RUN, GIL_SOLO_RUN, HANK_RUN, IVY_RUN, JO_RUN])
  let rehearsal: { readonly port: number }
  /** The rehearsal model answering in zstd (its stream compressed, flushed per event). */
  let zrehearsal: { readonly port: number; readonly received: ReadonlyArray<{ readonly apiKey: string | undefined }> }
  /** Another gateway on the same deployment, as after a daemon restart; closed by the caller. */
  let startAnother: (scope: Scope.Scope) => Promise<number>

  beforeAll(async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "roster-inject-"))
    const tlsFiles = await makeTestTls("198.51.100.7")
    testCa = tlsFiles.caPem
    fs.writeFileSync(path.join(dir, "upstream.crt"), tlsFiles.certPem)
    fs.writeFileSync(path.join(dir, "upstream.key"), tlsFiles.keyPem)
    fs.writeFileSync(path.join(dir, "test-ca.crt"), tlsFiles.caPem)
    outside = await makeOutsideHost({ cert: path.join(dir, "upstream.crt"), key: path.join(dir, "upstream.key") })
    scope = Effect.runSync(Scope.make())
    rehearsal = await Effect.runPromise(serveRehearsal({ port: 0, host: "127.0.0.1" }).pipe(Scope.extend(scope)))
    zrehearsal = await Effect.runPromise(serveRehearsal({ port: 0, host: "127.0.0.1", encoding: "zstd" }).pipe(Scope.extend(scope)))

    const paths = { ...Paths.fromEnv({ ROSTER_HOME: dir, HOME: dir }), home: dir }
    fs.mkdirSync(paths.config, { recursive: true })
    fs.writeFileSync(layout(paths).orgToml, [
      "[gateway]", `upstream_ca_file = "${path.join(dir, "test-ca.crt")}"`, "max_body_mib = 0.01",
      "[[grant]]", `name = "model"`, `hosts = ["198.51.100.7", "api.example.com"]`, "ports = [8443]", `scope = ["org/alice"]`, `credential = "anthropic"`,
      "[[grant]]", `name = "git"`, `hosts = ["git.example.com"]`, "ports = [8443]", `scope = ["org/alice"]`, `credential = "github"`, `header = "basic"`,
      "[[grant]]", `name = "oauth"`, `hosts = ["oauth.example.com"]`, "ports = [8443]", `scope = ["org/alice"]`, `credential = "openai-codex"`,
      "[[grant]]", `name = "searcher"`, `hosts = ["search.example.com"]`, "ports = [8443]", `scope = ["org/alice"]`, `credential = "anthropic"`,
      `server_tools = ["web_search"]`, `server_tool_domains = ["example.com"]`,
      "[[grant]]", `name = "metered"`, `hosts = ["model.example.com"]`, "ports = [8443]", `scope = ["org/carol"]`, `credential = "anthropic"`,
      "[[route]]", `host = "model.example.com"`, `upstream = "http://127.0.0.1:${rehearsal.port}"`,
      "[[grant]]", `name = "zmodel"`, `hosts = ["zmodel.example.com"]`, "ports = [8443]", `scope = ["org/ivy"]`, `credential = "anthropic"`,
      "[[route]]", `host = "zmodel.example.com"`, `upstream = "http://127.0.0.1:${zrehearsal.port}"`,
      "[budget]", "run_tokens = 30",
      // 12 tokens in cost $0.000036: the first token out crosses $0.00004.
      "[[chat]]", `provider = "slack"`, `connection = "team"`, "[[chat.channel]]", `id = "C0BUDGET"`, `worker = "gil"`, "budget_usd_day = 0.00004",
      ...["soon", "broken", "unlisted"].flatMap((c) => [
        "[[grant]]", `name = "${c}"`, `hosts = ["${c}.example.com"]`, "ports = [8443]", `scope = ["org/alice"]`, `credential = "${c}"`,
        "[[route]]", `host = "${c}.example.com"`, `upstream = "https://198.51.100.7:8443"`
      ]),
      // A GitHub-shaped grant deciding request by request: read acme's repositories, open pull requests, never delete.
      "[[grant]]", `name = "github"`, `hosts = ["gh.example.com"]`, "ports = [8443]", `scope = ["org/alice"]`, `credential = "anthropic"`,
      "[[grant.rules]]", `methods = ["DELETE"]`, `action = "deny"`,
      "[[grant.rules]]", `methods = ["GET"]`, `paths = ["/repos/acme/**"]`, `action = "allow"`,
      "[[grant.rules]]", `methods = ["POST"]`, `paths = ["/repos/acme/*/pulls"]`, `action = "allow"`,
      // An upgrade only where a rule names it.
      "[[grant.rules]]", `paths = ["/repos/acme/*/events"]`, "websocket = true", `action = "allow"`,
      "[[route]]", `host = "gh.example.com"`, `upstream = "https://198.51.100.7:8443"`,
      // An [[allow]] with rules: intercepted and decided request by request, nothing injected — over TLS and plain http.
      "[[allow]]", `hosts = ["mirror.example.com"]`, "ports = [8443]", `scope = ["org/alice"]`,
      "[[allow.rules]]", `methods = ["GET"]`, `paths = ["/pub/**"]`, `action = "allow"`,
      "[[allow.rules]]", `paths = ["/pub/live"]`, "websocket = true", `action = "allow"`,
      "[[route]]", `host = "mirror.example.com"`, `upstream = "https://198.51.100.7:8443"`,
      "[[allow]]", `hosts = ["plain.example.com"]`, "ports = [80]", `scope = ["org/alice"]`,
      "[[allow.rules]]", `methods = ["GET"]`, `paths = ["/pub/**"]`, `action = "allow"`,
      "[[route]]", `host = "plain.example.com"`, `upstream = "http://198.51.100.7:9080"`,
      // An MCP server over HTTP decided call by call, and a GraphQL endpoint by its operation.
      "[[grant]]", `name = "mcp"`, `hosts = ["mcp.example.com"]`, "ports = [8443]", `scope = ["org/alice"]`, `credential = "anthropic"`,
      "[[grant.rules]]", `paths = ["/mcp"]`, "jsonrpc = true", `calls = ["tools/call:write_file"]`, `action = "deny"`,
      "[[grant.rules]]", `paths = ["/mcp"]`, "jsonrpc = true", `action = "allow"`,
      "[[grant.rules]]", `paths = ["/graphql"]`, "graphql = true", `operations = ["query"]`, `action = "allow"`,
      "[[route]]", `host = "mcp.example.com"`, `upstream = "https://198.51.100.7:8443"`,
      "[[allow]]", `hosts = ["token.example.com"]`, `scope = ["org"]`,
      "[[route]]", `host = "token.example.com"`, `upstream = "https://198.51.100.7:8443"`,
      "[[grant]]", `name = "unconnected"`, `hosts = ["nokey.example.com"]`, "ports = [8443]", `scope = ["org/alice"]`, `credential = "nothing"`,
      "[[allow]]", `hosts = ["198.51.100.7"]`, "ports = [9443]", `scope = ["org/*"]`,
      "[[allow]]", `hosts = ["198.51.100.7"]`, "ports = [9080]", `scope = ["org/*"]`,
      "[[allow]]", `hosts = ["*.example.org"]`, "ports = [9443]", `scope = ["org/alice"]`,
      ...["api.example.com", "git.example.com", "oauth.example.com", "nokey.example.com", "search.example.com"].flatMap((h) => ["[[route]]", `host = "${h}"`, `upstream = "https://198.51.100.7:8443"`]),
      ...["a.example.org", "a.b.example.org", "example.org"].flatMap((h) => ["[[route]]", `host = "${h}"`, `upstream = "https://198.51.100.7:9443"`])
    ].join("\n"))
    const identity = layout(paths).identityDir
    fs.mkdirSync(identity, { recursive: true })
    fs.writeFileSync(path.join(identity, `${ALICE}.json`), JSON.stringify({ subject: "org/alice", run_id: "2026-12-01-09-00-00-0000a11c", worker: "alice", task_id: null }))
    fs.writeFileSync(path.join(identity, `${BOB}.json`), JSON.stringify({ subject: "org/bob", run_id: "2026-12-01-09-00-00-00000b0b", worker: "bob", task_id: null }))
    fs.writeFileSync(path.join(identity, `${CAROL}.json`), JSON.stringify({ subject: "org/carol", run_id: "2026-12-01-09-00-00-0000ca01", worker: "carol", task_id: null }))
    fs.writeFileSync(path.join(identity, `${ALICE_WS}.json`), JSON.stringify({ subject: "org/alice", run_id: "2026-12-01-09-00-00-0000a11d", worker: "alice", task_id: null }))
    fs.writeFileSync(path.join(identity, `${DAVE}.json`), JSON.stringify({ subject: "org/carol", run_id: DAVE_RUN, worker: "dave", task_id: null }))
    fs.writeFileSync(path.join(identity, `${ERIN}.json`), JSON.stringify({ subject: "org/carol", run_id: ERIN_RUN, worker: "erin", task_id: null }))
    fs.writeFileSync(path.join(identity, `${FRAN}.json`), JSON.stringify({ subject: "org/carol", run_id: FRAN_RUN, worker: "fran", task_id: null }))
    fs.writeFileSync(path.join(identity, `${HANK}.json`), JSON.stringify({ subject: "org/alice", run_id: HANK_RUN, worker: "hank", task_id: null }))
    fs.writeFileSync(path.join(identity, `${JO}.json`), JSON.stringify({ subject: "org/alice", run_id: JO_RUN, worker: "jo", task_id: null }))
    fs.writeFileSync(path.join(identity, `${IVY}.json`), JSON.stringify({ subject: "org/ivy", run_id: IVY_RUN, worker: "ivy", task_id: null }))
    for (const [token, run, chat] of [[GIL, GIL_RUN, "slack:c0budget"], [GIL_TOO, GIL_TOO_RUN, "slack:c0budget"], [GIL_SOLO, GIL_SOLO_RUN, undefined]] as const) {
      fs.writeFileSync(path.join(identity, `${token}.json`), JSON.stringify({ subject: "org/carol", run_id: run, worker: "gil", task_id: null, ...(chat ? { chat_channel: chat } : {}) }))
    }
    for (const [worker, tokens] of [["dave", 180], ["erin", 100_000], ["fran", 100_000], ["gil", 100_000], ["ivy", 100_000]] as const) {
      fs.mkdirSync(path.dirname(layout(paths).workerToml(worker)), { recursive: true })
      fs.writeFileSync(layout(paths).workerToml(worker), `[budget]\nrun_tokens = ${tokens}\n`)
    }
    auditDir = layout(paths).auditDir
    orgFile = layout(paths).orgToml
    franToml = layout(paths).workerToml("fran")

    const layer = Layer.mergeAll(
      OrgConfig.layer,
      Vault.layerTest({
        anthropic: { type: "api_key", key: REAL_KEY },
        github: { type: "api_key", key: REAL_GIT, kind: "basic" },
        "openai-codex": { type: "oauth", access: "REAL.oauth.access", refresh: "REAL-refresh", expires: Date.now() + 3_600_000 },
        // Logins that expire within the refresh margin: refreshed through token.example.com (routed to the test upstream).
        soon: { type: "oauth", access: "REAL.old.access", refresh: "REAL-refresh-1", expires: Date.now() + 60_000, token_url: "https://token.example.com/oauth/token", client_id: "test-client" },
        broken: { type: "oauth", access: "REAL.old.access", refresh: "bad", expires: Date.now() + 60_000, token_url: "https://token.example.com/oauth/token", client_id: "test-client" },
        unlisted: { type: "oauth", access: "REAL.old.access", refresh: "REAL-x", expires: Date.now() + 60_000, token_url: "https://unlisted.example.com/oauth/token", client_id: "test-client" }
      }),
      Dialer.layer,
      LiveRuns.layerTest((id) => live.has(id)),
      Audit.layer,
      RunLog.layer,
      TaskStore.layer,
      MemoryStore.layer,
      RunFence.layerNone,
      SpendLedger.layer
    ).pipe(Layer.provideMerge(testEngine(paths)))
    // Built once, in the suite's scope: the services live as long as the gateways using them
    // (provided per call, the audit log's open file would close before the requests it records).
    const services = await Effect.runPromise(Layer.buildWithScope(layer, scope))
    startAnother = async (s) => (await Effect.runPromise(serveGateway({ addrs: ["127.0.0.1"], port: 0 }).pipe(Effect.provide(services), Scope.extend(s)))).port
    port = (await Effect.runPromise(serveGateway({ addrs: ["127.0.0.1"], port: 0 }).pipe(Effect.provide(services), Scope.extend(scope)))).port
    org = await Effect.runPromise(Effect.flatMap(OrgConfig, (c) => c.snapshot).pipe(Effect.provide(services)))
    readRun = (worker, runId) => Effect.runPromise(Effect.flatMap(RunLog, (l) => l.read(worker, runId)).pipe(Effect.provide(services)))
    await Effect.runPromise(Effect.flatMap(RunLog, (l) =>
      Effect.all([
        l.start({ runId: "2026-12-01-09-00-00-0000a11c", worker: "alice", kind: "box" }), l.start({ runId: "2026-12-01-09-00-00-00000b0b", worker: "bob", kind: "box" }),
        l.start({ runId: "2026-12-01-09-00-00-0000ca01", worker: "carol", kind: "box" }),
        l.start({ runId: "2026-12-01-09-00-00-0000a11d", worker: "alice", kind: "box" }),
        l.start({ runId: DAVE_RUN, worker: "dave", kind: "box" }), l.start({ runId: ERIN_RUN, worker: "erin", kind: "box" }),
        l.start({ runId: FRAN_RUN, worker: "fran", kind: "box" }), l.start({ runId: HANK_RUN, worker: "hank", kind: "box" }), l.start({ runId: JO_RUN, worker: "jo", kind: "box" }),
        l.start({ runId: IVY_RUN, worker: "ivy", kind: "box" }),
        ...[GIL_RUN, GIL_TOO_RUN, GIL_SOLO_RUN].map((runId) => l.start({ runId, worker: "gil", kind: "box" }))
      ])
    ).pipe(Effect.provide(services)))
    // Each run's box has passed its check (recorded: a second gateway finds it in the record).
    for (const token of [ALICE, BOB, CAROL, ALICE_WS, DAVE, ERIN, FRAN, GIL, GIL_TOO, GIL_SOLO, HANK, IVY, JO]) expect(await reportPreflight(port, token)).toBe(200)
    rosterCa = fs.readFileSync(layout(paths).caCert, "utf8")
  })

  afterAll(async () => {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    outside?.close()
  })

  /** Alice's run record once `warned` holds of it (a warning is written after the answer), or as it is after two seconds. */
  const aliceOnceWarned = async (warned: (r: RunRecord | undefined) => boolean) => {
    let alice = await readRun("alice", "2026-12-01-09-00-00-0000a11c")
    for (let i = 0; i < 40 && !warned(alice); i++) alice = await new Promise((r) => setTimeout(r, 50)).then(() => readRun("alice", "2026-12-01-09-00-00-0000a11c"))
    return alice
  }

  /** The spend ledger's lines of one run (a ledger file is made before its first line is written: polled, it can be empty). */
  const ledgerOf = (runId: string) =>
    fs.readdirSync(path.join(auditDir, "..", "ledger")).flatMap((f) =>
      fs.readFileSync(path.join(auditDir, "..", "ledger", f), "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as { run_id: string; input: number; output: number }))
      .filter((e) => e.run_id === runId)

  /** A run's ledger lines once there are some (written just after its answer ends, by the usage notes), or none after two seconds. */
  const ledgerLines = async (runId: string) => {
    for (let i = 0; i < 40 && ledgerOf(runId).length === 0; i++) await new Promise((r) => setTimeout(r, 50))
    return ledgerOf(runId)
  }

  /** A run's record once `ready` holds of it (usage and stops are written after the answer), or as it is after two seconds. */
  const runOnce = async (worker: string, runId: string, ready: (r: RunRecord | undefined) => boolean) => {
    let run = await readRun(worker, runId)
    for (let i = 0; i < 40 && !ready(run); i++) run = await new Promise((r) => setTimeout(r, 50)).then(() => readRun(worker, runId))
    return run
  }

  /** A model call as pi makes it: the sentinel in x-api-key, a JSON body. */
  const modelCall = (body: unknown) => ({
    method: "POST", path: "/v1/messages", headers: { "x-api-key": SENTINEL, "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body)
  })
  const hello = (text = "hi") => ({ model: "claude-sonnet-4-5", max_tokens: 100, stream: true, messages: [{ role: "user", content: text }] })

  const echo = (r: Reply) => JSON.parse(r.body) as {
    method: string; path: string; headers: Record<string, string>; body: string; x_api_key_sha256: string | null; authorization_sha256: string | null
  }

  it("an in-scope request reaches the TLS upstream with the real key, and an echo never shows it to the box", async () => {
    const r = await viaGateway(port, ALICE, "198.51.100.7:8443", {
      method: "POST", path: `/v1/messages?key=${SENTINEL}`,
      headers: { "x-api-key": SENTINEL, cookie: `k=${SENTINEL}`, "x-other": SENTINEL, "content-type": "application/json" },
      body: JSON.stringify({ note: SENTINEL })
    }, [rosterCa])
    expect(r.status).toBe(200)
    const e = echo(r)
    expect(e.x_api_key_sha256).toBe(sha(REAL_KEY))
    // The upstream echoed the key it got; the gateway scrubbed it on the way back.
    expect(e.headers["x-api-key"]).toBe(SENTINEL)
    expect(r.body).not.toContain(REAL_KEY)
    expect(JSON.stringify(r.headers)).not.toContain(REAL_KEY)
    // A sentinel anywhere else is forwarded untouched.
    expect(e.path).toBe(`/v1/messages?key=${SENTINEL}`)
    expect(e.headers.cookie).toBe(`k=${SENTINEL}`)
    expect(e.headers["x-other"]).toBe(SENTINEL)
    expect(JSON.parse(e.body).note).toBe(SENTINEL)
    expect(e.headers["proxy-authorization"]).toBeUndefined()
  })

  it("a box's new connection resumes its TLS session with the gateway (no full handshake), per host's certificate", async () => {
    const first = await tlsHandshakeVia(port, ALICE, "198.51.100.7:8443", [rosterCa])
    expect(first.reused).toBe(false)
    expect(first.session).toBeInstanceOf(Buffer)
    const again = await tlsHandshakeVia(port, ALICE, "198.51.100.7:8443", [rosterCa], first.session)
    expect(again.reused).toBe(true)
    // Without a ticket it is a full handshake: the resumption is the ticket's, not a cache keyed by the box.
    expect((await tlsHandshakeVia(port, ALICE, "198.51.100.7:8443", [rosterCa])).reused).toBe(false)
  })

  it("a compressed reflecting answer (gzip, br, deflate, zstd, stacked) is decoded and scrubbed; an encoding roster cannot undo is a 502", async () => {
    for (const as of ["gzip", "br", "deflate", "deflate-raw", "zstd", "gzip,br", "zstd,gzip"]) {
      const r = await viaGateway(port, ALICE, "198.51.100.7:8443", { path: `/encoded?as=${as}`, headers: { "x-api-key": SENTINEL } }, [rosterCa])
      expect(r.status, as).toBe(200)
      // The box gets the decoded bytes (no content-encoding left to undo) with the key scrubbed.
      expect(r.headers["content-encoding"], as).toBeUndefined()
      const answer = JSON.parse(r.body) as { echoed: string; headers: Record<string, string> }
      expect(answer.echoed, as).toBe(SENTINEL)
      expect(answer.headers["accept-encoding"], as).toBe("identity")
      expect(r.body, as).not.toContain(REAL_KEY)
    }
    const lzw = await viaGateway(port, ALICE, "198.51.100.7:8443", { path: "/encoded?as=compress", headers: { "x-api-key": SENTINEL } }, [rosterCa])
    expect(lzw.status).toBe(502)
    expect(JSON.parse(lzw.body).roster.why).toBe("encoding")
    expect(JSON.parse(lzw.body).error.message).toContain("(compress)")
    expect(lzw.body).not.toContain(REAL_KEY)
  })

  it("a model call answered as a zstd event stream: the box gets it decoded, event by event, and the run is metered as for an uncompressed one", async () => {
    const r = await viaGateway(port, IVY, "zmodel.example.com:8443", {
      method: "POST", path: "/v1/messages", headers: { "x-api-key": SENTINEL, "content-type": "application/json" },
      body: JSON.stringify({ model: "claude-sonnet-4-5", max_tokens: 100, stream: true, messages: [{ role: "user", content: "hi" }] })
    }, [rosterCa])
    expect(r.status).toBe(200)
    expect(r.headers["content-encoding"]).toBeUndefined()
    expect(r.body).toContain("event: message_start")
    expect(r.body).toContain("event: message_stop")
    // Flushed per event: the stream reached the box in pieces, not as one decoded lump at the end.
    expect(r.arrivals.length).toBeGreaterThan(1)
    expect(await ledgerLines(IVY_RUN)).toEqual([expect.objectContaining({ run_id: IVY_RUN, input: 12, output: 24 })])
    expect(zrehearsal.received.at(-1)?.apiKey).toBe(REAL_KEY)
  })

  it("a key reflected with only some characters encoded (%2D, %2d, \\u002d, a mix) never reaches the box", async () => {
    const r = await viaGateway(port, ALICE, "198.51.100.7:8443", { path: "/partial", headers: { "x-api-key": SENTINEL } }, [rosterCa])
    expect(r.status).toBe(200)
    // Each spelling came back scrubbed whole: the box parses the sentinel (the JSON-encoded one, its text).
    const answer = JSON.parse(r.body) as { raw: ReadonlyArray<string>; json: string }
    expect(answer.raw).toEqual([SENTINEL, SENTINEL, SENTINEL, SENTINEL, SENTINEL])
    expect(answer.json).toBe(SENTINEL)
    expect(r.body).not.toMatch(/REAL|api03/)
    expect(r.headers["x-reflected"]).toBe(SENTINEL)
  })

  it("the sentinel only in the URL path is audited by place (never by value), taints the run and warns it", async () => {
    const r = await viaGateway(port, ALICE, "api.example.com:8443", { path: `/v1/${SENTINEL}/x`, headers: { "x-api-key": SENTINEL } }, [rosterCa])
    expect(r.status).toBe(200)
    const inPath = (x: AuditRecord) => x.path === "/v1/[sentinel]/x"
    const audited = (await auditedOnce(auditDir, (lines) => lines.some(inPath))).find(inPath)
    expect(audited).toMatchObject({ run_id: "2026-12-01-09-00-00-0000a11c", status: 200, injected: true, sentinel_unsubstituted: ["path"] })
    const warned = (r: RunRecord | undefined) => r?.warnings?.some((w) => w.includes("api.example.com") && w.includes("in path")) === true
    // The taint is written before the box hears the answer; the warning once the answer is done.
    const alice = await aliceOnceWarned(warned)
    expect(alice?.tainted).toContainEqual(expect.objectContaining({ reason: "sentinel_upstream", host: "api.example.com", detail: "the placeholder went out in path" }))
    expect(warned(alice)).toBe(true)
  })

  it("a [[route]] sends a granted host to its upstream, injected", async () => {
    const r = await viaGateway(port, ALICE, "api.example.com:8443", { path: "/v1/models", headers: { "x-api-key": SENTINEL } }, [rosterCa])
    expect(r.status).toBe(200)
    expect(echo(r).x_api_key_sha256).toBe(sha(REAL_KEY))
    // The box's Host, as its client sent it (the port named: not https's own).
    expect(echo(r).headers.host).toBe("api.example.com:8443")
  })

  it("inside a tunnel to a granted host, a request that names another host (Host, SNI) is refused before anything is injected or sent, audited, and taints the run", async () => {
    // Host fronting: a shared front end routes by Host, so the grant's key would reach another tenant.
    const fronted = await viaGateway(port, HANK, "api.example.com:8443", { path: "/front/host", headers: { host: "tenant-b.example.com", "x-api-key": SENTINEL } }, [rosterCa])
    expect(fronted.status).toBe(421)
    expect(JSON.parse(fronted.body).error.message).toContain(`the request names "tenant-b.example.com" (Host) inside a tunnel to api.example.com:8443`)
    // The same host on another port is another origin; the SNI naming another host is refused too.
    const port443 = await viaGateway(port, HANK, "api.example.com:8443", { path: "/front/port", headers: { host: "api.example.com", "x-api-key": SENTINEL } }, [rosterCa])
    expect(port443.status).toBe(421)
    const sni = await viaGateway(port, HANK, "api.example.com:8443", { path: "/front/sni", headers: { "x-api-key": SENTINEL }, servername: "tenant-b.example.com" }, [rosterCa])
    expect(sni.status).toBe(421)
    expect(sni.body).toContain("(SNI)")
    // The canonical forms of the tunnel's own host are its own.
    const same = await viaGateway(port, HANK, "api.example.com:8443", { path: "/front/same", headers: { host: "API.Example.com.:8443", "x-api-key": SENTINEL } }, [rosterCa])
    expect(same.status).toBe(200)
    expect(echo(same).x_api_key_sha256).toBe(sha(REAL_KEY))
    // On a kept-alive connection (the fast path), the second request names another host: refused as well.
    const c = await keptAlive(port, HANK, "api.example.com:8443", [rosterCa])
    try {
      expect((await c.request({ path: "/front/kept-1", headers: { "x-api-key": SENTINEL } })).status).toBe(200)
      expect((await c.request({ path: "/front/kept-2", headers: { host: "tenant-b.example.com:8443", "x-api-key": SENTINEL } })).status).toBe(421)
    } finally {
      c.close()
    }
    const front = (x: AuditRecord) => x.path.startsWith("/front/")
    const records = (await auditedOnce(auditDir, (lines) => lines.filter(front).length >= 6)).filter(front)
    for (const p of ["/front/host", "/front/port", "/front/sni", "/front/kept-2"]) {
      expect(records.find((x) => x.path === p), p).toMatchObject({ run_id: HANK_RUN, status: 421, injected: false, bytes_up: 0, bytes_down: 0 })
    }
    expect(records.find((x) => x.path === "/front/same")).toMatchObject({ status: 200, injected: true })
    const hank = await runOnce("hank", HANK_RUN, (r) => (r?.tainted ?? []).length > 0)
    expect(hank?.tainted).toContainEqual(expect.objectContaining({ reason: "misdirected", host: "api.example.com" }))
  })

  it("Bearer (a sentinel JWT) and Basic (git over HTTPS) are swapped in their own header only", async () => {
    const bearer = await viaGateway(port, ALICE, "oauth.example.com:8443", {
      path: "/", headers: { authorization: `Bearer ${sentinelJwt(Date.now())}`, "x-api-key": SENTINEL }
    }, [rosterCa])
    expect(echo(bearer).authorization_sha256).toBe(sha("Bearer REAL.oauth.access"))
    expect(echo(bearer).x_api_key_sha256).toBe(sha(SENTINEL))
    const basic = await viaGateway(port, ALICE, "git.example.com:8443", {
      path: "/org/repo.git/info/refs", headers: { authorization: `Basic ${Buffer.from(`x-access-token:${SENTINEL}`).toString("base64")}` }
    }, [rosterCa])
    expect(echo(basic).authorization_sha256).toBe(sha(`Basic ${Buffer.from(`x-access-token:${REAL_GIT}`).toString("base64")}`))
    expect(basic.body).not.toContain(Buffer.from(`x-access-token:${REAL_GIT}`).toString("base64"))
  })

  it("never replaces the sentinel outside the grant: another subject, host, port, or a tunnelled host", async () => {
    expect((await viaGateway(port, BOB, "198.51.100.7:8443", { path: "/", headers: { "x-api-key": SENTINEL } }, [rosterCa])).status).toBe(403)
    expect((await viaGateway(port, ALICE, "api.example.com.evil.test:8443", { path: "/", headers: { "x-api-key": SENTINEL } }, [rosterCa])).status).toBe(403)
    expect((await viaGateway(port, ALICE, "198.51.100.7:8444", { path: "/", headers: { "x-api-key": SENTINEL } }, [rosterCa])).status).toBe(403)
    // 9443 is an [[allow]]: tunnelled end to end (the box talks TLS with the upstream itself), unchanged.
    const tunnelled = await viaGateway(port, BOB, "198.51.100.7:9443", { path: "/", headers: { "x-api-key": SENTINEL } }, [testCa])
    expect(tunnelled.status).toBe(200)
    expect(echo(tunnelled).x_api_key_sha256).toBe(sha(SENTINEL))
  })

  it("a request body over [gateway] max_body_mib gets 413", async () => {
    const r = await viaGateway(port, ALICE, "198.51.100.7:8443", {
      method: "POST", path: "/v1/messages", headers: { "x-api-key": SENTINEL }, body: "x".repeat(64 * 1024)
    }, [rosterCa])
    expect(r.status).toBe(413)
  })

  it("a redirect is passed back to the box, not followed", async () => {
    const r = await viaGateway(port, ALICE, "198.51.100.7:8443", { path: "/redirect", headers: { "x-api-key": SENTINEL } }, [rosterCa])
    expect(r.status).toBe(302)
    expect(r.headers.location).toBe("https://elsewhere.test/next")
  })

  it("a streamed (SSE) answer arrives incrementally, not buffered to the end", async () => {
    const r = await viaGateway(port, ALICE, "198.51.100.7:8443", { path: "/sse", headers: { "x-api-key": SENTINEL } }, [rosterCa])
    expect(r.status).toBe(200)
    expect(r.body).toBe("event: tick\ndata: 0\n\nevent: tick\ndata: 1\n\nevent: tick\ndata: 2\n\n")
    expect(r.arrivals.length).toBeGreaterThanOrEqual(3)
    // The upstream waits 500 ms between events: the first must not wait for the last.
    expect((r.arrivals.at(-1) ?? 0) - (r.arrivals[0] ?? 0)).toBeGreaterThanOrEqual(800)
  })

  /** A WebSocket is audited when the gateway has seen both sides close, a moment after the client has: its record, once written (2 s at most). */
  const auditedFor = async (wsPath: string) =>
    (await auditedOnce(auditDir, (lines) => lines.some((x) => x.path === wsPath))).reverse().find((x) => x.path === wsPath)

  it("a WebSocket to a granted host: the handshake gets the key; the box never sees it — in the 101, a message, or split over two fragments", async () => {
    const s = await wsVia(port, ALICE, "198.51.100.7:8443", "/ws", { headers: { "x-api-key": SENTINEL }, send: ["hello"], expect: 3, ca: [rosterCa] })
    expect(s.status, s.messages[0]).toBe(101)
    expect(JSON.stringify(s)).not.toContain(REAL_KEY)
    // The 101 reflected the key in a header: scrubbed.
    expect(s.headers["x-echo-key"]).toBe(SENTINEL)
    const [handshake, split, echoed] = s.messages
    const seen = JSON.parse(handshake ?? "{}")
    expect(seen.x_api_key_sha256).toBe(sha(REAL_KEY))
    // The client offered compression (ws does by default): the upstream never heard the offer, and the token stayed with the gateway.
    expect(seen.headers["sec-websocket-extensions"]).toBeUndefined()
    expect(seen.headers["proxy-authorization"]).toBeUndefined()
    expect(seen.headers.upgrade).toBe("websocket")
    expect(split).toBe(`split:${SENTINEL}`)
    expect(echoed).toBe("hello")
    expect(s.closed.code).toBe(1000)
    const record = await auditedFor("/ws")
    expect(record).toMatchObject({ run_id: "2026-12-01-09-00-00-0000a11c", injected: true, note: "websocket", host: "198.51.100.7" })
    expect(record?.bytes_down).toBeGreaterThan(0)
  })

  it("a WebSocket frame from the box carrying the sentinel is audited loudly and taints the run; an upstream that forces compression is cut", async () => {
    const s = await wsVia(port, ALICE_WS, "198.51.100.7:8443", "/ws-frames", { headers: { "x-api-key": SENTINEL }, send: [`token=${SENTINEL}`], expect: 3, ca: [rosterCa] })
    expect(s.status).toBe(101)
    expect(s.messages[2]).toBe(`token=${SENTINEL}`)
    const record = await auditedFor("/ws-frames")
    expect(record).toMatchObject({ status: 101, injected: true, sentinel_unsubstituted: ["websocket frame"] })
    // Written before the frame went on: the echo (so the close) could not come before it.
    const run = await readRun("alice", "2026-12-01-09-00-00-0000a11d")
    expect(run?.tainted).toEqual([{ reason: "sentinel_upstream", host: "198.51.100.7", detail: "the placeholder went out in websocket frame", time: expect.any(String) }])

    const deflate = await wsVia(port, ALICE, "198.51.100.7:8443", "/ws-deflate", { headers: { "x-api-key": SENTINEL }, expect: 1, ca: [rosterCa] })
    expect(deflate.status).toBe(502)
    expect(deflate.messages[0]).toContain("negotiated a WebSocket extension (compression) roster cannot scrub")
    expect(JSON.stringify(deflate)).not.toContain(REAL_KEY)
  })

  it("an [[allow]]ed host's WebSocket is tunnelled end to end, nothing injected", async () => {
    const s = await wsVia(port, ALICE, "198.51.100.7:9443", "/ws", { headers: { "x-api-key": SENTINEL }, send: ["through"], expect: 3, ca: [testCa] })
    expect(s.status).toBe(101)
    const seen = JSON.parse(s.messages[0] ?? "{}")
    // TLS with the upstream itself: the sentinel arrived as sent, and the client's compression offer too.
    expect(seen.headers["x-api-key"]).toBe(SENTINEL)
    expect(seen.headers["sec-websocket-extensions"]).toContain("permessage-deflate")
    expect(s.messages[2]).toBe("through")
  })

  it("a grant's request rules decide each request in its tunnel: the allowed reach the upstream injected, on the path the rules saw; the rest are refused naming the rule, never sent", async () => {
    const gh = (method: string, p: string, body?: string) =>
      viaGateway(port, HANK, "gh.example.com:8443", { method, path: p, headers: { "x-api-key": SENTINEL }, ...(body === undefined ? {} : { body }) }, [rosterCa])
    const read = await gh("GET", "/repos/acme/app/issues?state=open")
    expect(read.status).toBe(200)
    expect(echo(read)).toMatchObject({ path: "/repos/acme/app/issues?state=open", x_api_key_sha256: sha(REAL_KEY) })
    const pull = await gh("POST", "/repos/acme/app/pulls", "{}")
    expect(pull.status).toBe(200)
    expect(echo(pull)).toMatchObject({ method: "POST", path: "/repos/acme/app/pulls", x_api_key_sha256: sha(REAL_KEY) })
    // The upstream gets the path the rules saw: dot-segments and repeated slashes resolved first.
    const folded = await gh("GET", "/repos/acme/x/../app//pulls")
    expect(folded.status).toBe(200)
    expect(echo(folded).path).toBe("/repos/acme/app/pulls")
    // Refused by the gateway itself (its JSON, not the upstream's echo), the rule that decided named.
    const refusals: Array<[string, string, number, RegExp]> = [
      ["DELETE", "/repos/acme/app", 403, /DELETE \/repos\/acme\/app on gh\.example\.com is refused for org\/alice by \[\[grant\]\] "github" rule 1 \(methods = \["DELETE"\], action = "deny"\)/],
      ["GET", "/repos/acme/%2e%2e/other/app", 403, /GET \/repos\/other\/app .* its default \(deny: no rule matched\)/],
      ["POST", "/repos/acme/app/merges", 403, /its default/],
      ["GET", "/repos/acme%2Fapp", 400, /no single meaning: an encoded slash/]
    ]
    for (const [method, p, status, reason] of refusals) {
      const r = await gh(method, p)
      expect(r.status, `${method} ${p}`).toBe(status)
      const said = JSON.parse(r.body) as { error: { message: string }; roster: { why: string }; x_api_key_sha256?: unknown }
      expect(said.x_api_key_sha256, "the upstream never answered").toBeUndefined()
      expect(said.error.message).toMatch(reason)
      expect(said.roster.why).toBe(status === 400 ? "ambiguous" : "request_rule")
    }
    // A WebSocket on a REST path would carry what no rule sees: refused, saying so — though GET /repos/acme/** is allowed.
    const ws = await wsVia(port, HANK, "gh.example.com:8443", "/repos/acme/app/ws", { headers: { "x-api-key": SENTINEL }, expect: 1, ca: [rosterCa] })
    expect(ws.status).toBe(403)
    expect(ws.headers["x-roster-refusal"]).toBe("request_rule")
    expect(ws.messages[0]).toMatch(/a WebSocket upgrade on \/repos\/acme\/app\/ws on gh\.example\.com is refused .* only by a rule that names it: websocket = true/)
    // One a websocket = true rule names goes through, the handshake injected.
    const events = await wsVia(port, HANK, "gh.example.com:8443", "/repos/acme/app/events", { headers: { "x-api-key": SENTINEL }, send: ["ping"], expect: 3, ca: [rosterCa] })
    expect(events.status).toBe(101)
    expect(JSON.parse(events.messages[0] ?? "{}").x_api_key_sha256).toBe(sha(REAL_KEY))
    expect(events.messages[2]).toBe("ping")
    const mine = (x: AuditRecord) => x.run_id === HANK_RUN && x.host === "gh.example.com"
    const audited = (await auditedOnce(auditDir, (lines) => lines.filter(mine).length >= 9)).filter(mine)
    expect(audited.find((x) => x.method === "DELETE")).toMatchObject({ status: 403, note: expect.stringContaining(`"github" rule 1`) })
    expect(audited.filter((x) => x.status === 200).map((x) => x.injected)).toEqual([true, true, true])
    expect(audited.find((x) => x.status === 101)).toMatchObject({ path: "/repos/acme/app/events", injected: true })
  })

  it("what was already right stays so: pipelined requests each decided, h2c and the HTTP/2 preface refused, a path past the cap never sent", async () => {
    const statuses = (got: string) => [...got.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]))
    const before = outside.heard().length
    // Two requests back to back on one connection: the second, which the rules refuse, is decided on its own.
    const pipelined = await rawVia(port, JO, "gh.example.com:8443", [
      "GET /repos/acme/app HTTP/1.1\r\nHost: gh.example.com:8443\r\nx-api-key: " + SENTINEL + "\r\n\r\n",
      "DELETE /repos/acme/app HTTP/1.1\r\nHost: gh.example.com:8443\r\nx-api-key: " + SENTINEL + "\r\nConnection: close\r\n\r\n"
    ].join(""), [rosterCa])
    expect(statuses(pipelined)).toEqual([200, 403])
    // h2c, inside a tunnel and on plain http: no protocol but a WebSocket is switched to.
    const h2c = "GET /repos/acme/app/events HTTP/1.1\r\nHost: gh.example.com:8443\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n"
    expect(statuses(await rawVia(port, JO, "gh.example.com:8443", h2c, [rosterCa]))).toEqual([400])
    const auth = `Proxy-Authorization: Basic ${Buffer.from(`${JO}:x`).toString("base64")}\r\n`
    expect(statuses(await rawVia(port, JO, undefined, `GET http://plain.example.com/pub/x HTTP/1.1\r\nHost: plain.example.com\r\n${auth}Upgrade: h2c\r\nConnection: Upgrade\r\n\r\n`)))
      .toEqual([400])
    // The HTTP/2 preface, to the gateway itself and inside a tunnel: HTTP/1.1 only.
    expect(statuses(await rawVia(port, JO, undefined, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))).toEqual([400])
    expect(statuses(await rawVia(port, JO, "gh.example.com:8443", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", [rosterCa]))).toEqual([400])
    // A request line past the 16 KiB head: refused (431) before anything is decided or sent.
    const long = `/repos/acme/${"a/".repeat(9000)}x`
    expect(statuses(await rawVia(port, JO, "gh.example.com:8443", `GET ${long} HTTP/1.1\r\nHost: gh.example.com:8443\r\n\r\n`, [rosterCa]))).toEqual([431])
    // The upstream heard the first pipelined request only.
    expect(outside.heard().slice(before).map((h) => `${h.method} ${h.url}`)).toEqual(["GET /repos/acme/app"])
  })

  it("an [[allow]] with rules is intercepted and decided per request, nothing injected; over plain http too; its WebSocket only where a rule names it", async () => {
    // The box's own header (no sentinel: one sent to a host with no credential would be a placeholder leaking, and taint the run).
    const mirror = (method: string, p: string) => viaGateway(port, HANK, "mirror.example.com:8443", { method, path: p, headers: { "x-api-key": "the-box-own-value" } }, [rosterCa])
    // Intercepted: the box speaks TLS with roster's CA (the upstream's own CA would not do), the upstream gets the request as sent.
    const read = await mirror("GET", "/pub/a/../b?x=1")
    expect(read.status).toBe(200)
    expect(echo(read)).toMatchObject({ method: "GET", path: "/pub/b?x=1", x_api_key_sha256: sha("the-box-own-value") })
    const put = await mirror("PUT", "/pub/b")
    expect(put.status).toBe(403)
    const said = JSON.parse(put.body) as { error: { message: string }; roster: { why: string; org_toml?: ReadonlyArray<string> }; path?: unknown }
    expect(said.path, "the upstream never answered").toBeUndefined()
    expect(said.error.message).toMatch(/PUT \/pub\/b on mirror\.example\.com is refused for org\/alice by \[\[allow\]\] hosts = \["mirror\.example\.com"\] its default \(deny/)
    expect(said.roster.org_toml).toContain("[[allow.rules]]")
    expect((await wsVia(port, HANK, "mirror.example.com:8443", "/pub/other", { expect: 1, ca: [rosterCa] })).status).toBe(403)
    const live = await wsVia(port, HANK, "mirror.example.com:8443", "/pub/live", { headers: { "x-api-key": "the-box-own-value" }, send: ["tick"], expect: 3, ca: [rosterCa] })
    expect(live.status).toBe(101)
    expect(JSON.parse(live.messages[0] ?? "{}").headers["x-api-key"]).toBe("the-box-own-value")
    expect(live.messages[2]).toBe("tick")
    // Plain http: the same kind of rules on the absolute-form request.
    const plain = await forwardVia(port, HANK, "http://plain.example.com/pub/../pub/x")
    expect(plain.status).toBe(200)
    expect(echo(plain).path).toBe("/pub/x")
    const closed = await forwardVia(port, HANK, "http://plain.example.com/private")
    expect(closed.status).toBe(403)
    expect(JSON.parse(closed.body).error.message).toMatch(/GET \/private on plain\.example\.com is refused .* \[\[allow\]\] hosts = \["plain\.example\.com"\]/)
    const mine = (x: AuditRecord) => x.run_id === HANK_RUN && (x.host === "mirror.example.com" || x.host === "plain.example.com")
    // A line each: the read and the PUT, two upgrades (one refused), two plain requests (one refused).
    const audited = (await auditedOnce(auditDir, (lines) => lines.filter(mine).length >= 6)).filter(mine)
    expect(audited.map((x) => x.status).sort()).toEqual([101, 200, 200, 403, 403, 403])
    expect(audited.filter((x) => x.status === 200 || x.status === 101).every((x) => x.injected !== true)).toBe(true)
    expect(audited.find((x) => x.method === "PUT")).toMatchObject({ status: 403, note: expect.stringContaining("[[allow]]") })
  })

  it("a JSON-RPC rule decides an MCP server's calls, a batch whole; a GraphQL rule the document's one operation; the body decided is the body sent", async () => {
    const post = (p: string, body: unknown) =>
      viaGateway(port, HANK, "mcp.example.com:8443", { method: "POST", path: p, headers: { "x-api-key": SENTINEL, "content-type": "application/json" }, body: JSON.stringify(body) }, [rosterCa])
    const call = (name: string, id = 1) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name, arguments: { path: "/notes" } } })
    const read = await post("/mcp", call("read_file"))
    expect(read.status).toBe(200)
    expect(JSON.parse(echo(read).body)).toEqual(call("read_file"))
    expect(echo(read).x_api_key_sha256).toBe(sha(REAL_KEY))
    const write = await post("/mcp", call("write_file"))
    expect(write.status).toBe(403)
    expect(JSON.parse(write.body).error.message).toMatch(/POST \/mcp \(call tools\/call:write_file\) on mcp\.example\.com is refused .* "mcp" rule 1/)
    const batch = await post("/mcp", [call("read_file"), call("write_file", 2)])
    expect(batch.status).toBe(403)
    expect(JSON.parse(batch.body).error.message).toMatch(/a batch of 2 calls: its call tools\/call:write_file/)
    const query = await post("/graphql", { query: "query Q { viewer { mutation: login } }" })
    expect(query.status).toBe(200)
    const mutation = await post("/graphql", { query: "mutation M { deleteRepository { id } }" })
    expect(mutation.status).toBe(403)
    const two = await post("/graphql", { query: "query A { x } mutation B { y }" })
    expect(two.status).toBe(400)
    expect(JSON.parse(two.body).error.message).toMatch(/2 operations/)
  })

  it("a grant whose credential is not connected says how to connect it — to a request and to a WebSocket handshake", async () => {
    const r = await viaGateway(port, ALICE, "nokey.example.com:8443", { path: "/", headers: { "x-api-key": SENTINEL } }, [rosterCa])
    expect(r.status).toBe(502)
    expect(r.headers["x-roster-refusal"]).toBe("no_credential")
    expect(r.body).toContain("roster connection add nothing")
    // The handshake is the connection's first request: it gets the refusal decided as its tunnel opened.
    const s = await wsVia(port, ALICE, "nokey.example.com:8443", "/ws", { headers: { "x-api-key": SENTINEL }, expect: 1, ca: [rosterCa] })
    expect(s.status).toBe(502)
    expect(s.headers["x-roster-refusal"]).toBe("no_credential")
    expect(s.messages[0]).toContain("roster connection add nothing")
  })

  it("a model request declaring provider-side tools is refused unless its grant allows them, the domains passed on", async () => {
    const post = (host: string, body: string) =>
      viaGateway(port, ALICE, `${host}:8443`, {
        method: "POST", path: "/v1/messages", headers: { "x-api-key": SENTINEL, "content-type": "application/json" }, body
      }, [rosterCa])
    const search = { type: "web_search_20250305", name: "web_search", max_uses: 3 }
    const request = (tools: Array<unknown>) => JSON.stringify({ model: "m", max_tokens: 10, messages: [{ role: "user", content: "hi" }], tools })
    const refused = await post("api.example.com", request([{ name: "read", input_schema: {} }, search]))
    expect(refused.status).toBe(403)
    const body = JSON.parse(refused.body)
    expect(body.roster.why).toBe("server_tools")
    expect(body.error.message).toContain("web_search")
    expect(body.error.message).toContain(`server_tools = ["web_search"] to the [[grant]] named "model"`)
    // Code execution and remote MCP servers are the same kind of egress; so is a batch's request.
    expect((await post("api.example.com", request([{ type: "code_execution_20250825", name: "code_execution" }]))).status).toBe(403)
    expect((await post("api.example.com", JSON.stringify({ model: "m", mcp_servers: [{ type: "url", url: "https://mcp.example.net" }] }))).status).toBe(403)
    expect((await post("api.example.com", JSON.stringify({ requests: [{ custom_id: "a", params: { tools: [search] } }] }))).status).toBe(403)
    expect((await post("search.example.com", request([{ type: "web_fetch_20250910", name: "web_fetch" }]))).status).toBe(403)
    // Allowed on the grant that lists it, its domains no wider than the grant's.
    const allowed = await post("search.example.com", request([{ ...search, allowed_domains: ["docs.example.com", "evil.test"] }]))
    expect(allowed.status).toBe(200)
    const sent = JSON.parse(echo(allowed).body)
    expect(sent.tools[0]).toEqual({ ...search, allowed_domains: ["docs.example.com"] })
    const unlisted = JSON.parse(echo(await post("search.example.com", request([{ ...search, blocked_domains: ["x.test"] }]))).body)
    expect(unlisted.tools[0]).toEqual({ ...search, allowed_domains: ["example.com"] })
    // What is checked is what is sent: a duplicate key is read once, here, and the provider gets that reading.
    const dup = await post("api.example.com", `{"model":"m","tools":[${JSON.stringify(search)}],"tools":[]}`)
    expect(dup.status).toBe(200)
    expect(JSON.parse(echo(dup).body)).toEqual({ model: "m", tools: [] })
    const notJson = await post("api.example.com", `{"tools":[${JSON.stringify(search)}], "x": NaN}`)
    expect(notJson.status).toBe(400)
    // A "type" elsewhere in the conversation is not a tool.
    expect((await post("api.example.com", JSON.stringify({ model: "m", messages: [{ role: "user", content: [{ type: "web_search_20250305" }] }] }))).status).toBe(200)
  })

  it("a refusal says why, for whom, and the org.toml lines that would allow it (JSON the SDKs read)", async () => {
    const r = await viaGateway(port, BOB, "198.51.100.7:8443", { path: "/", headers: { "x-api-key": SENTINEL } }, [rosterCa])
    expect(r.status).toBe(403)
    expect(r.headers["content-type"]).toBe("application/json")
    expect(r.headers["x-should-retry"]).toBe("false")
    const body = JSON.parse(r.body)
    expect(body.error.message).toContain("org/bob")
    expect(body.roster).toEqual({
      why: "no_rule", host: "198.51.100.7", port: 8443, subject: "org/bob",
      org_toml: [`# in the [[grant]] named "model":`, `scope = ["org/alice","org/bob"]`]
    })
    const tunnel = await viaGateway(port, ALICE, "unknown.example.net:443", { path: "/" }, [rosterCa])
    expect(tunnel.status).toBe(403)
    expect(JSON.parse(tunnel.body).roster).toMatchObject({ why: "no_rule", org_toml: ["[[allow]]", `hosts = ["unknown.example.net"]`, `scope = ["org/alice"]`] })
    const noToken = await viaGateway(port, undefined, "198.51.100.7:9443", { path: "/" }, [testCa])
    // A CONNECT from loopback without a token is a host-side caller ("org"), which no rule here admits.
    expect(JSON.parse(noToken.body).roster).toMatchObject({ why: "no_rule", subject: "org" })
    const bogus = await viaGateway(port, "c3".repeat(32), "198.51.100.7:9443", { path: "/" }, [testCa])
    expect(bogus.status).toBe(407)
    expect(JSON.parse(bogus.body).roster.why).toBe("no_token")
    // Refused egress taints the run, once per host and reason, written before the box heard the answer.
    expect((await readRun("bob", "2026-12-01-09-00-00-00000b0b"))?.tainted).toEqual([
      { reason: "egress_refused", host: "198.51.100.7", time: expect.any(String), detail: "no_rule" }
    ])
    const alice = await readRun("alice", "2026-12-01-09-00-00-0000a11c")
    expect(alice?.tainted).toContainEqual(expect.objectContaining({ reason: "egress_refused", host: "unknown.example.net", detail: "no_rule" }))
    // The first request sent the placeholder upstream in a cookie, a header, the query and the body.
    expect(alice?.tainted).toContainEqual(expect.objectContaining({ reason: "sentinel_upstream", host: "198.51.100.7" }))
    expect(alice?.tainted).toContainEqual(expect.objectContaining({ reason: "server_tools", host: "api.example.com" }))
    expect(alice?.warnings?.[0]).toContain("left the gateway with the sentinel")
  })

  it("roster policy check answers what the gateway does, for 20 URL/rule pairs, sending nothing", async () => {
    const subjects = { alice: ALICE, bob: BOB } as const
    const pairs: ReadonlyArray<readonly [keyof typeof subjects, string]> = [
      ["alice", "https://198.51.100.7:8443/v1/models"], ["bob", "https://198.51.100.7:8443/"], ["alice", "https://api.example.com:8443/v1/models"],
      ["alice", "https://api.example.com/"], ["alice", "https://api.example.com.evil.test:8443/"], ["alice", "https://198.51.100.7:8444/"],
      ["bob", "198.51.100.7:9443"], ["alice", "198.51.100.7:9443"], ["alice", "http://198.51.100.7:9080/"], ["alice", "http://api.example.com:8443/"],
      ["bob", "http://198.51.100.7:9081/"], ["alice", "https://git.example.com:8443/org/repo.git/info/refs"], ["bob", "https://git.example.com:8443/"],
      ["alice", "https://unknown.example.net/"], ["bob", "https://oauth.example.com:8443/"], ["alice", "https://oauth.example.com:8443/"],
      ["alice", "a.example.org:9443"], ["bob", "a.example.org:9443"], ["alice", "a.b.example.org:9443"], ["alice", "example.org:9443"],
      ["alice", "a.example.org:9444"], ["bob", "http://198.51.100.7:9080/"]
    ]
    expect(pairs.length).toBeGreaterThanOrEqual(20)
    const seen = new Set<string>()
    for (const [who, url] of pairs) {
      const policy = checkPolicy(compilePolicy(org), `org/${who}`, url)
      const gateway = url.startsWith("http://")
        ? await forwardVia(port, subjects[who], url)
        : url.startsWith("https://")
        ? await viaGateway(port, subjects[who], new URL(url).host.includes(":") ? new URL(url).host : `${new URL(url).host}:443`,
          { path: new URL(url).pathname }, [rosterCa, testCa])
        : await connectVia(port, subjects[who], url)
      const refused = [400, 403, 407].includes(gateway.status)
      expect({ who, url, allowed: !refused }).toEqual({ who, url, allowed: policy.allowed })
      if (!policy.allowed) {
        expect({ who, url, status: gateway.status, why: JSON.parse(gateway.body).roster.why })
          .toEqual({ who, url, status: policy.status, why: policy.refusal.detail.why })
      }
      seen.add(policy.allowed ? policy.how : policy.refusal.detail.why)
    }
    // The pairs cover every kind of answer the policy gives without resolving a name.
    expect([...seen].sort()).toEqual(["forwarded", "no_rule", "terminated", "tls_only", "tunnelled", "wrong_port"])
  })

  it("an OAuth login about to expire is refreshed once, through the gateway's own policy, and every waiting request uses the new token", async () => {
    const call = () => viaGateway(port, ALICE, "soon.example.com:8443", { path: "/v1/models", headers: { authorization: `Bearer ${sentinelJwt(Date.now())}` } }, [rosterCa])
    const [a, b, c] = await Promise.all([call(), call(), call()])
    for (const r of [a, b, c]) {
      expect(r?.status).toBe(200)
      expect(echo(r!).authorization_sha256).toBe(sha("Bearer REAL.oauth.access.1"))
    }
    // Stored: the next request uses the refreshed login without refreshing again.
    const d = await call()
    expect(echo(d).authorization_sha256).toBe(sha("Bearer REAL.oauth.access.1"))
    expect(d.body).not.toContain("REAL.oauth.access")
    // A refresh the provider refuses, and one whose endpoint no rule allows: a clear error with the fix.
    const broken = await viaGateway(port, ALICE, "broken.example.com:8443", { path: "/", headers: { authorization: "Bearer x" } }, [rosterCa])
    expect(broken.status).toBe(502)
    expect(JSON.parse(broken.body).roster.why).toBe("credential_refresh")
    expect(JSON.parse(broken.body).error.message).toContain(`the OAuth login "broken" expires and could not be refreshed (the token endpoint answered 400) — sign in again with pi on this host (pi, then /login), then: roster connection add broken --from-pi-login`)
    const unlisted = await viaGateway(port, ALICE, "unlisted.example.com:8443", { path: "/", headers: { authorization: "Bearer x" } }, [rosterCa])
    expect(unlisted.status).toBe(502)
    expect(JSON.parse(unlisted.body).error.message).toContain(`allow it for the gateway itself: [[allow]] hosts = ["unlisted.example.com"] scope = ["org"]`)
  })

  it("a spend budget cuts the answer that crosses it, refuses the next call (not retried), and survives a gateway restart", async () => {
    const ask = (gateway: number) => viaGateway(gateway, CAROL, "model.example.com:8443", {
      method: "POST", path: "/v1/messages", headers: { "x-api-key": SENTINEL, "content-type": "application/json" },
      body: JSON.stringify({ model: "claude-sonnet-4-5", max_tokens: 100, stream: true, messages: [{ role: "user", content: "hi" }] })
    }, [rosterCa])
    // 12 tokens in, then the answer's text: the budget of 30 is crossed while it streams (output estimated
    // from the text until the answer's own count, which never comes: the rest is not forwarded).
    const first = await ask(port)
    expect(first.status).toBe(200)
    expect(first.body).toContain("event: message_start")
    expect(first.body).toContain("event: content_block_delta")
    expect(first.body).not.toContain("message_delta")
    expect(first.body).not.toContain("message_stop")
    const last = first.body.trim().split("\n\n").at(-1) ?? ""
    expect(last).toMatch(/^event: error\ndata: /)
    const said = JSON.parse(last.split("data: ")[1] ?? "{}").error.message as string
    expect(said).toMatch(/^roster gateway: out of budget: run_tokens is 30 tokens and \d+ tokens is spent — this run is stopped/)
    // Counted before the box heard the end; written to the run's record just after.
    let run = await readRun("carol", "2026-12-01-09-00-00-0000ca01")
    for (let i = 0; i < 100 && !(run?.usage && run.stopped); i++) {
      await new Promise((r) => setTimeout(r, 20))
      run = await readRun("carol", "2026-12-01-09-00-00-0000ca01")
    }
    expect(run?.usage).toMatchObject({ input_tokens: 12, answers: 1, models: ["claude-sonnet-4-5"] })
    expect(12 + (run?.usage?.output_tokens ?? 0)).toBeGreaterThan(30)
    expect(said).toContain(`and ${12 + (run?.usage?.output_tokens ?? 0)} tokens is spent`)
    expect(run?.usage?.usd).toBeCloseTo((12 * 3 + (run?.usage?.output_tokens ?? 0) * 15) / 1e6, 10)
    expect(run?.stopped).toMatchObject({ by: "budget" })
    expect(run?.tainted).toContainEqual(expect.objectContaining({ reason: "budget" }))
    // A call that would start past the budget: a 4xx the SDKs do not retry, which says which budget and how to raise it.
    const second = await ask(port)
    expect(second.status).toBe(402)
    expect(second.headers["x-should-retry"]).toBe("false")
    const refusal = JSON.parse(second.body)
    expect(refusal.roster.why).toBe("budget")
    expect(refusal.error.message).toContain(`out of budget: run_tokens is 30 tokens and ${12 + (run?.usage?.output_tokens ?? 0)} tokens is spent`)
    expect(refusal.error.message).toContain("raise run_tokens in [budget] in org.toml or in workers/carol/worker.toml")
    // A gateway started afresh on the same deployment reads the ledger: the run is still over.
    const again = Effect.runSync(Scope.make())
    try {
      expect((await ask(await startAnother(again))).status).toBe(402)
    } finally {
      await Effect.runPromise(Scope.close(again, Exit.void))
    }
    expect(ledgerOf("2026-12-01-09-00-00-0000ca01")).toEqual([expect.objectContaining({ run_id: "2026-12-01-09-00-00-0000ca01", worker: "carol", input: 12, output: run?.usage?.output_tokens, priced: true })])
  })

  it("a chat channel's daily budget counts every run charged to it: the answer that crosses it is cut, the channel's next run refused, a run charged to none goes on", async () => {
    const ask = (token: string) => viaGateway(port, token, "model.example.com:8443", {
      method: "POST", path: "/v1/messages", headers: { "x-api-key": SENTINEL, "content-type": "application/json" },
      body: JSON.stringify({ model: "claude-sonnet-4-5", max_tokens: 100, stream: true, messages: [{ role: "user", content: "hi" }] })
    }, [rosterCa])
    const first = await ask(GIL)
    expect(first.status).toBe(200)
    expect(first.body).not.toContain("message_stop")
    const said = JSON.parse((first.body.trim().split("\n\n").at(-1) ?? "").split("data: ")[1] ?? "{}").error.message as string
    expect(said).toMatch(/^roster gateway: out of budget: slack channel C0BUDGET may spend \$0\.0000 \(estimated\) a day and \$0\.\d{4} \(estimated\) is spent today — this run is stopped/)
    expect(said).toContain("starts again at 00:00 UTC; to allow more, raise budget_usd_day of its [[chat.channel]] in org.toml")
    const run = await runOnce("gil", GIL_RUN, (r) => r?.stopped !== undefined)
    expect(run?.stopped).toMatchObject({ by: "budget" })
    // The answer is the channel's in the ledger (what `roster usage --channel` sums).
    expect(await ledgerLines(GIL_RUN)).toEqual([expect.objectContaining({ worker: "gil", input: 12, chat_channel: "slack:c0budget" })])
    // Another run of the channel (its next session, or a task one queued) starts past the budget: refused, not retried.
    const next = await ask(GIL_TOO)
    expect(next.status).toBe(402)
    expect(JSON.parse(next.body).error.message).toContain("out of budget: slack channel C0BUDGET")
    expect((await runOnce("gil", GIL_TOO_RUN, (r) => r?.stopped !== undefined))?.stopped).toMatchObject({ by: "budget" })
    // The worker's own work outside the channel is not the channel's to stop.
    const solo = await ask(GIL_SOLO)
    expect(solo.status).toBe(200)
    expect(solo.body).toContain("message_stop")
    expect(await ledgerLines(GIL_SOLO_RUN)).toEqual([expect.not.objectContaining({ chat_channel: expect.anything() })])
  })

  it("requests after the first on a kept-alive connection are each injected, scrubbed and audited; a sentinel in a streamed body warns the run", async () => {
    const c = await keptAlive(port, ALICE, "198.51.100.7:8443", [rosterCa])
    try {
      for (let i = 1; i <= 5; i++) {
        const r = await c.request({ path: `/kept/${i}?q=${i}`, headers: { "x-api-key": SENTINEL } })
        expect(r.status).toBe(200)
        expect(echo(r).x_api_key_sha256).toBe(sha(REAL_KEY))
        // The upstream echoed the real key; the box gets the sentinel back.
        expect(echo(r).headers["x-api-key"]).toBe(SENTINEL)
        expect(r.body).not.toContain(REAL_KEY)
      }
      // A body that streams through (not one read whole and checked) is watched for the sentinel as it goes.
      const upload = await c.request({
        method: "PUT", path: "/kept/upload", headers: { "x-api-key": SENTINEL, "content-type": "application/octet-stream" }, body: `blob ${SENTINEL} blob`
      })
      expect(upload.status).toBe(200)
      expect(echo(upload).body).toBe(`blob ${SENTINEL} blob`)
      expect(c.closed()).toBe(false)
    } finally {
      c.close()
    }
    const kept = (x: AuditRecord) => x.path.startsWith("/kept/")
    const records = (await auditedOnce(auditDir, (lines) => lines.filter(kept).length >= 6)).filter(kept)
    expect(records.map((x) => x.path).sort()).toEqual(["/kept/1", "/kept/2", "/kept/3", "/kept/4", "/kept/5", "/kept/upload"])
    for (const x of records) expect(x).toMatchObject({ run_id: "2026-12-01-09-00-00-0000a11c", subject: "org/alice", status: 200, injected: true })
    expect(records.find((x) => x.path === "/kept/upload")?.sentinel_unsubstituted).toEqual(["body"])
    expect(records.filter((x) => x.path !== "/kept/upload").every((x) => x.sentinel_unsubstituted === undefined)).toBe(true)
    const warned = (r: RunRecord | undefined) => r?.warnings?.some((w) => w.includes("198.51.100.7") && w.includes("not a credential) in body:")) === true
    const alice = await aliceOnceWarned(warned)
    expect(warned(alice)).toBe(true)
  })

  it("an org.toml edit that takes a grant away refuses the next request on a connection already open, within a second", async () => {
    const c = await keptAlive(port, ALICE, "git.example.com:8443", [rosterCa])
    const before = fs.readFileSync(orgFile, "utf8")
    try {
      for (const p of ["/before/1", "/before/2"]) expect((await c.request({ path: p })).status).toBe(200)
      fs.writeFileSync(orgFile, before.replace(`hosts = ["git.example.com"]`, `hosts = ["git2.example.com"]`))
      const edited = Date.now()
      let r = await c.request({ path: "/after" })
      while (r.status === 200 && Date.now() - edited < 3_000) r = await new Promise((ok) => setTimeout(ok, 20)).then(() => c.request({ path: "/after" }))
      const seenAfter = Date.now() - edited
      expect(r.status).toBe(403)
      expect(r.headers["x-roster-refusal"]).toBe("no_rule")
      expect(r.body).toContain("git.example.com")
      // Half a second for org.toml's stamp, a quarter for the connection's grant; the rest is this machine's load.
      expect(seenAfter).toBeLessThan(1_500)
    } finally {
      fs.writeFileSync(orgFile, before)
      c.close()
    }
  })

  it("model calls after the first on a kept-alive connection are each metered; the one that crosses its worker's budget is cut, the next refused", async () => {
    // dave's worker.toml: run_tokens = 180. Each rehearsal answer ends at 12 tokens in and 24 out,
    // but streams a long text first (its output estimated from the text until the real count):
    // a call or more go through whole, then one crosses the budget as it streams.
    const c = await keptAlive(port, DAVE, "model.example.com:8443", [rosterCa])
    const replies: Array<Reply> = []
    const lastEvent = (r: Reply) => r.body.trim().split("\n\n").at(-1) ?? ""
    try {
      for (let i = 0; i < 10 && replies.at(-1)?.status !== 402; i++) replies.push(await c.request(modelCall(hello())))
    } finally {
      c.close()
    }
    const whole = replies.findIndex((r) => !lastEvent(r).startsWith("event: message_stop"))
    expect(whole).toBeGreaterThanOrEqual(1)
    expect(replies.map((r) => r.status)).toEqual([...replies.slice(0, whole + 1).map(() => 200), 402])
    // The crossing answer ends with the budget's error event, the next call is refused.
    const cut = lastEvent(replies[whole]!)
    expect(cut).toMatch(/^event: error\ndata: /)
    expect(JSON.parse(cut.split("data: ")[1] ?? "{}").error.message).toMatch(/^roster gateway: out of budget: run_tokens is 180 tokens and \d+ tokens is spent/)
    expect(JSON.parse(replies.at(-1)!.body).roster.why).toBe("budget")
    const answers = whole + 1
    const run = await runOnce("dave", DAVE_RUN, (r) => r?.usage?.answers === answers && r.stopped !== undefined)
    expect(run?.usage).toMatchObject({ input_tokens: 12 * answers, answers })
    expect(run?.stopped).toMatchObject({ by: "budget" })
    const ledger = ledgerOf(DAVE_RUN)
    expect(ledger.map((e) => e.input)).toEqual(replies.slice(0, answers).map(() => 12))
    expect(ledger.slice(0, whole).map((e) => e.output)).toEqual(replies.slice(0, whole).map(() => 24))
    const mine = (x: AuditRecord) => x.run_id === DAVE_RUN && x.path === "/v1/messages"
    const audited = (await auditedOnce(auditDir, (lines) => lines.filter(mine).length >= replies.length)).filter(mine)
    expect(audited.map((x) => x.status)).toEqual(replies.map((r) => r.status))
    expect(audited.slice(0, answers).every((x) => x.injected === true)).toBe(true)
  })

  it("a budget lowered in worker.toml reaches a connection kept busy with model calls: its next calls are refused", async () => {
    const c = await keptAlive(port, FRAN, "model.example.com:8443", [rosterCa])
    const statuses: Array<number> = []
    let lowered = 0
    try {
      for (let i = 0; i < 3; i++) statuses.push((await c.request(modelCall(hello()))).status)
      // 36 tokens an answer: three calls are past a budget of 50. The worker's settings are looked at
      // twice a second and a busy connection's grant decided again within a quarter of one; the calls
      // go on without a pause, so it is the background decision that must read the new budget.
      fs.writeFileSync(franToml, "[budget]\nrun_tokens = 50\n")
      lowered = statuses.length
      const until = Date.now() + 3_000
      while (Date.now() < until && statuses.at(-1) !== 402) statuses.push((await c.request(modelCall(hello()))).status)
    } finally {
      c.close()
    }
    expect(statuses.slice(0, lowered)).toEqual([200, 200, 200])
    expect(statuses.at(-1)).toBe(402)
    expect(statuses.slice(lowered, -1).every((x) => x === 200)).toBe(true)
    const run = await runOnce("fran", FRAN_RUN, (r) => r?.stopped !== undefined)
    expect(run?.stopped).toMatchObject({ by: "budget" })
  })

  it("on a kept-alive connection, each model call's body is checked as the first's: the sentinel in it taints, a server tool or bad JSON is refused", async () => {
    const c = await keptAlive(port, ERIN, "model.example.com:8443", [rosterCa])
    const statuses: Array<number> = []
    let refused: Array<{ roster: { why: string } }> = []
    try {
      statuses.push((await c.request(modelCall(hello()))).status)
      statuses.push((await c.request(modelCall(hello(`my key is ${SENTINEL}`)))).status)
      const tools = await c.request(modelCall({ ...hello(), tools: [{ type: "web_search_20250305", name: "web_search", max_uses: 3 }] }))
      const malformed = await c.request(modelCall(`{"model": "claude-sonnet-4-5", "messages": [`))
      statuses.push(tools.status, malformed.status)
      refused = [JSON.parse(tools.body), JSON.parse(malformed.body)]
      statuses.push((await c.request(modelCall(hello()))).status)
      expect(c.closed()).toBe(false)
    } finally {
      c.close()
    }
    expect(statuses).toEqual([200, 200, 403, 400, 200])
    expect(refused.map((r) => r.roster.why)).toEqual(["server_tools", "malformed"])
    const mine = (x: AuditRecord) => x.run_id === ERIN_RUN && x.path === "/v1/messages"
    const audited = (await auditedOnce(auditDir, (lines) => lines.filter(mine).length >= 5)).filter(mine)
    expect(audited.map((x) => x.status)).toEqual([200, 200, 403, 400, 200])
    expect(audited.map((x) => x.sentinel_unsubstituted ?? [])).toEqual([[], ["body"], [], [], []])
    const run = await runOnce("erin", ERIN_RUN, (r) => r?.usage?.answers === 3 && (r.tainted?.length ?? 0) >= 2 && (r.warnings?.length ?? 0) >= 1)
    expect(run?.usage?.answers).toBe(3)
    expect(run?.tainted?.map((t) => t.reason).sort()).toEqual(["sentinel_upstream", "server_tools"])
    expect(run?.warnings?.some((w) => w.includes("model.example.com") && w.includes("in body:"))).toBe(true)
    expect(ledgerOf(ERIN_RUN)).toHaveLength(3)
  })

  it("a token whose run has ended gets 407 at once, though its file is still there", async () => {
    const before = await viaGateway(port, BOB, "198.51.100.7:9443", { path: "/" }, [testCa])
    expect(before.status).toBe(200)
    live.delete("2026-12-01-09-00-00-00000b0b")
    const after = await viaGateway(port, BOB, "198.51.100.7:9443", { path: "/" }, [testCa])
    expect(after.status).toBe(407)
  })

  it("audits each request: path without query, injected yes/no, bytes", async () => {
    const records = await auditedOnce(auditDir, (lines) => lines.some((r) => r.path === "/v1/messages"))
    const injected = records.find((r) => r.path === "/v1/messages")
    expect(injected).toMatchObject({ run_id: "2026-12-01-09-00-00-0000a11c", subject: "org/alice", host: "198.51.100.7", method: "POST", status: 200, injected: true })
    expect(injected?.bytes_up).toBeGreaterThan(0)
    expect(injected?.bytes_down).toBeGreaterThan(0)
    // The first request carried the sentinel in other headers, the query and the body: said where, never what.
    expect(injected?.sentinel_unsubstituted).toEqual(["header:cookie", "header:x-other", "query", "body"])
    expect(JSON.stringify(records)).not.toContain(SENTINEL)
    expect(JSON.stringify(records)).not.toContain(REAL_KEY)
  })
})
