import { MemoryStore } from "../../src/memory/MemoryStore.js"
import { testEngine } from "../support/harness.js"
import { SpendLedger } from "../../src/spend/SpendLedger.js"
import { RunFence } from "../../src/run/RunFence.js"
import { RunLog } from "../../src/run/RunLog.js"
import { TaskStore } from "../../src/task/TaskStore.js"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Ref } from "effect"
import * as fs from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { OrgConfig } from "../../src/config/OrgConfig.js"
import { layout, Paths } from "../../src/config/Paths.js"
import { Audit } from "../../src/gateway/base/Audit.js"
import { Dialer } from "../../src/gateway/base/Dialer.js"
import { LiveRuns } from "../../src/gateway/base/LiveRuns.js"
import { reportPreflight } from "../support/boxClient.js"
import { serveGateway } from "../../src/gateway/server.js"
import { Vault } from "../../src/vault/Vault.js"
import { makeOutsideHost } from "../support/netns.js"
import { auditedOnce } from "../support/audit.js"
import type { AuditRecord } from "../../src/gateway/base/Audit.js"

const TOKEN = "ab".repeat(32)
const LIVE_RUN = "2026-01-01-00-00-00-00000000"

const deployment = (org: string) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "roster-gw-"))
  const paths = { ...Paths.fromEnv({ ROSTER_HOME: root, HOME: root }), home: root }
  fs.mkdirSync(paths.config, { recursive: true })
  fs.writeFileSync(layout(paths).orgToml, org)
  fs.mkdirSync(layout(paths).identityDir, { recursive: true })
  fs.writeFileSync(path.join(layout(paths).identityDir, `${TOKEN}.json`), JSON.stringify({ subject: "org/alice", run_id: LIVE_RUN, worker: "alice", task_id: null }))
  return paths
}

const auth = (token: string) => `Basic ${Buffer.from(`${token}:x`).toString("base64")}`

/** A raw CONNECT: the status line and whatever the tunnel brought back within a second. */
const connect = (port: number, target: string, headers: Record<string, string> = {}) =>
  Effect.promise(() =>
    new Promise<string>((resolve) => {
      const s = net.connect(port, "127.0.0.1")
      let data = ""
      s.on("data", (c) => (data += c.toString()))
      s.on("close", () => resolve(data))
      s.on("error", () => resolve(data))
      s.write(`CONNECT ${target} HTTP/1.1\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("")}\r\n`)
      setTimeout(() => s.end(), 1000)
    })
  )

const get = (port: number, target: string, headers: Record<string, string> = {}) =>
  Effect.promise(() =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request({ host: "127.0.0.1", port, path: target, headers }, (res) => {
        let body = ""
        res.on("data", (c) => (body += c.toString()))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }))
      })
      req.on("error", reject)
      req.end()
    })
  )


// The services are built in the caller's scope, so they live as long as the gateway that uses
// them (Effect.provide(layer) would close them — the audit log's open file among them — the
// moment serveGateway returned, and a later request's file would be left to the GC).
const serve = (
  paths: ReturnType<typeof deployment>,
  dialer: Layer.Layer<Dialer>,
  live: (id: string) => boolean = (id) => id === LIVE_RUN,
  fence: Layer.Layer<RunFence> = RunFence.layerNone
) =>
  Layer.build(
    Layer.mergeAll(OrgConfig.layer, Vault.layer, dialer, LiveRuns.layerTest(live), Audit.layer, RunLog.layer, TaskStore.layer, MemoryStore.layer, fence, SpendLedger.layer).pipe(
      Layer.provideMerge(testEngine(paths))
    )
  ).pipe(
    Effect.flatMap((services) => serveGateway({ addrs: ["127.0.0.1"], port: 0 }).pipe(Effect.provide(services))),
    // The box's check has passed (the gateway holds a run's requests until it hears so).
    Effect.tap(({ port }) => Effect.promise(() => reportPreflight(port, TOKEN)))
  )

/** One raw request on a fresh connection: the answer's status line, and whether the gateway closed it. */
const raw = (port: number, request: string) =>
  new Promise<{ readonly status: string; readonly closed: boolean }>((resolve) => {
    const s = net.connect(port, "127.0.0.1")
    let got = ""
    let done = false
    const finish = (closed: boolean) => {
      if (done) return
      done = true
      s.destroy()
      resolve({ status: got.split("\r\n")[0] ?? "", closed })
    }
    s.on("data", (d) => (got += d.toString()))
    s.on("close", () => finish(true))
    s.on("error", () => finish(true))
    s.write(request)
    setTimeout(() => finish(false), 2000)
  })

const H = "Host: example.com\r\n"
const MALFORMED: Record<string, string> = {
  "a request line without an HTTP version": `CONNECT example.com:443\r\n${H}\r\n`,
  "an unknown HTTP version": `CONNECT example.com:443 HTTP/7.1\r\n${H}\r\n`,
  "HTTP/2 on a plain connection": `GET http://example.com/ HTTP/2.0\r\n${H}\r\n`,
  "obsolete line folding": `GET http://example.com/ HTTP/1.1\r\n${H}X-A: a\r\n b\r\n\r\n`,
  "conflicting Content-Length": `POST http://example.com/ HTTP/1.1\r\n${H}Content-Length: 1\r\nContent-Length: 2\r\n\r\nab`,
  "a duplicate Content-Length": `POST http://example.com/ HTTP/1.1\r\n${H}Content-Length: 2\r\nContent-Length: 2\r\n\r\nab`,
  "Content-Length with Transfer-Encoding": `POST http://example.com/ HTTP/1.1\r\n${H}Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
  "a duplicate Transfer-Encoding": `POST http://example.com/ HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
  "a CONNECT target without a port": `CONNECT example.com HTTP/1.1\r\n${H}\r\n`,
  "a CONNECT target that is a path": `CONNECT /etc/passwd HTTP/1.1\r\n${H}\r\n`,
  "a CONNECT target that is a URL": `CONNECT http://example.com:443/ HTTP/1.1\r\n${H}\r\n`,
  "a header name outside the token grammar": `GET http://example.com/ HTTP/1.1\r\n${H}X(A): 1\r\n\r\n`,
  "a space before a header's colon": `GET http://example.com/ HTTP/1.1\r\n${H}X-A : 1\r\n\r\n`,
  "a method outside the token grammar": `G(T http://example.com/ HTTP/1.1\r\n${H}\r\n`
}

describe("the gateway parses strictly (raw sockets)", () => {
  for (const [what, request] of Object.entries(MALFORMED)) {
    it.live(`refuses ${what} with 400 and closes the connection`, () => {
      const paths = deployment(`[[allow]]\nhosts = ["example.com"]\nscope = ["org"]\nports = [80, 443]\n`)
      return Effect.gen(function*() {
        const { port } = yield* serve(paths, Dialer.layer)
        const answer = yield* Effect.promise(() => raw(port, request))
        expect(answer).toEqual({ status: "HTTP/1.1 400 Bad Request", closed: true })
      }).pipe(Effect.scoped)
    })
  }

  it.live("still speaks HTTP/1.0 and 1.1 (a well-formed CONNECT is judged by policy, not refused as malformed)", () => {
    const paths = deployment("")
    return Effect.gen(function*() {
      const { port } = yield* serve(paths, Dialer.layer)
      for (const v of ["1.0", "1.1"]) {
        const answer = yield* Effect.promise(() => raw(port, `CONNECT example.com:443 HTTP/${v}\r\n${H}\r\n`))
        expect(answer.status).toMatch(/^HTTP\/1\.1 40[37] /)
      }
    }).pipe(Effect.scoped)
  })
})

describe("the gateway (real listener)", () => {
  it.live("answers /healthz with this deployment's config root", () => {
    const paths = deployment("")
    return Effect.gen(function*() {
      const { port } = yield* serve(paths, Dialer.layer)
      const r = yield* get(port, "/healthz")
      expect(r.status).toBe(200)
      expect(JSON.parse(r.body)).toMatchObject({ ok: true, config_root: paths.config })
      // Which connections have a credential and from where: names and sources, never a value.
      const credentials = JSON.parse(r.body).credentials as Record<string, string>
      expect(Object.values(credentials).every((s) => ["vault", "pi-login", "env"].includes(s))).toBe(true)
      expect(r.body).not.toMatch(/sk-|key"\s*:/)
    }).pipe(Effect.scoped)
  })

  it.live("never dials loopback, private, link-local or metadata addresses a name resolves to", () => {
    const paths = deployment(`[[allow]]\nhosts = ["*.inside.test", "2852039166"]\nscope = ["org/*", "org"]\nports = [80, 443]\n`)
    return Effect.gen(function*() {
      const dialled = yield* Ref.make<ReadonlyArray<string>>([])
      const table = {
        "meta.inside.test": ["169.254.169.254"],
        "loop.inside.test": ["127.0.0.1"],
        "ten.inside.test": ["10.0.0.5"],
        "mapped.inside.test": ["::ffff:127.0.0.1"],
        "cgnat.inside.test": ["100.64.1.1"],
        "mixed.inside.test": ["198.51.100.9", "192.168.1.1"],
        // What libc makes of a decimal address: the check is on the address dialled, not the name.
        "2852039166": ["169.254.169.254"]
      }
      const { port } = yield* serve(paths, Dialer.layerRecording(table, dialled))
      for (const host of Object.keys(table)) {
        const r = yield* connect(port, `${host}:443`, { "Proxy-Authorization": auth(TOKEN) })
        expect(r, host).toContain("HTTP/1.1 403")
      }
      const plain = yield* get(port, "http://meta.inside.test/latest/meta-data/", { "Proxy-Authorization": auth(TOKEN) })
      expect(plain.status).toBe(403)
      expect(yield* Ref.get(dialled)).toEqual([])
    }).pipe(Effect.scoped)
  })

  it.live("refuses a box without a known token (407) and hosts no rule allows (403)", () => {
    const paths = deployment(`[[allow]]\nhosts = ["198.51.100.7"]\nscope = ["org/alice"]\nports = [9099]\n`)
    return Effect.gen(function*() {
      const dialled = yield* Ref.make<ReadonlyArray<string>>([])
      const { port } = yield* serve(paths, Dialer.layerRecording({}, dialled))
      expect(yield* connect(port, "198.51.100.7:9099", { "Proxy-Authorization": auth("cd".repeat(32)) })).toContain("407")
      expect(yield* connect(port, "198.51.100.7:9099", { "Proxy-Authorization": auth("../../etc/passwd") })).toContain("407")
      expect(yield* connect(port, "198.51.100.7:9100", { "Proxy-Authorization": auth(TOKEN) })).toContain("403")
      // No token from loopback is the host itself (subject "org"), which this rule does not admit.
      expect(yield* connect(port, "198.51.100.7:9099")).toContain("403")
      expect(yield* Ref.get(dialled)).toEqual([])
    }).pipe(Effect.scoped)
  })

  it.live("a fleet node cut off from its database stands its boxes down: every request of theirs is refused 503 with why, nothing dialled; then they go on", () => {
    const paths = deployment(`[[allow]]\nhosts = ["198.51.100.7"]\nscope = ["org/alice"]\nports = [9099]\n`)
    return Effect.gen(function*() {
      const dialled = yield* Ref.make<ReadonlyArray<string>>([])
      const down = yield* Ref.make(false)
      const fence = Layer.succeed(RunFence, {
        guard: (_run, land) => land,
        standsDown: Effect.map(Ref.get(down), (d) => (d ? "fleet node n1 is cut off from the fleet's database (test)" : null))
      })
      // Its preflight passed before the cut (a report while standing down is refused like any other).
      const { port } = yield* serve(paths, Dialer.layerRecording({}, dialled), undefined, fence)
      yield* Ref.set(down, true)
      const tunnel = yield* connect(port, "198.51.100.7:9099", { "Proxy-Authorization": auth(TOKEN) })
      expect(tunnel).toContain("503")
      const plain = yield* get(port, "http://198.51.100.7:9099/", { "Proxy-Authorization": auth(TOKEN) })
      expect(plain.status).toBe(503)
      expect(plain.body).toContain("cut off from the fleet's database")
      const act = yield* Effect.promise(() => new Promise<{ status: number; body: string }>((resolve, reject) => {
        const body = JSON.stringify({ text: "hello" })
        const req = http.request({ host: "127.0.0.1", port, method: "POST", path: "/v1/actions/message_user", headers: { authorization: `Bearer ${TOKEN}`, "content-length": Buffer.byteLength(body) } }, (res) => {
          let text = ""
          res.on("data", (c: Buffer) => (text += c.toString()))
          res.once("end", () => resolve({ status: res.statusCode ?? 0, body: text }))
        })
        req.once("error", reject)
        req.end(body)
      }))
      expect(act.status).toBe(503)
      expect(act.body).toContain("cut off from the fleet's database")
      expect(yield* Ref.get(dialled)).toEqual([])
      // A beat landed: the same request is judged by policy again (the recording dialer answers 502).
      yield* Ref.set(down, false)
      expect(yield* connect(port, "198.51.100.7:9099", { "Proxy-Authorization": auth(TOKEN) })).toContain("502")
      expect(yield* Ref.get(dialled)).toEqual(["198.51.100.7:9099"])
    }).pipe(Effect.scoped)
  })

  describe("a run's requests wait for its box's preflight (pi starts beside the check)", () => {
    const HELD = "ef".repeat(32)
    const HELD_RUN = "2026-01-01-00-00-00-0000f11e"
    const heldDeployment = () => {
      const paths = deployment(`[[allow]]\nhosts = ["198.51.100.7"]\nscope = ["org/alice"]\nports = [9099]\n`)
      fs.writeFileSync(path.join(layout(paths).identityDir, `${HELD}.json`), JSON.stringify({ subject: "org/alice", run_id: HELD_RUN, worker: "alice", task_id: null }))
      return paths
    }
    const live = (id: string): boolean => id === LIVE_RUN || id === HELD_RUN
    const action = (port: number, token: string) =>
      Effect.promise(() => new Promise<number>((resolve, reject) => {
        const body = JSON.stringify({ text: "hello" })
        const req = http.request({ host: "127.0.0.1", port, method: "POST", path: "/v1/actions/message_user", headers: { authorization: `Bearer ${token}`, "content-length": Buffer.byteLength(body) } }, (res) => {
          res.resume()
          res.once("end", () => resolve(res.statusCode ?? 0))
        })
        req.once("error", reject)
        req.end(body)
      }))

    it.live("held until the check passes: nothing is dialled before, the request goes on after", () => {
      const paths = heldDeployment()
      return Effect.gen(function*() {
        const dialled = yield* Ref.make<ReadonlyArray<string>>([])
        const { port } = yield* serve(paths, Dialer.layerRecording({}, dialled), live)
        const tunnel = yield* Effect.fork(connect(port, "198.51.100.7:9099", { "Proxy-Authorization": auth(HELD) }))
        const forward = yield* Effect.fork(get(port, "http://198.51.100.7:9099/", { "Proxy-Authorization": auth(HELD) }))
        yield* Effect.sleep("400 millis")
        expect(yield* Ref.get(dialled)).toEqual([])
        expect(yield* Effect.promise(() => reportPreflight(port, HELD))).toBe(200)
        // The recording dialer refuses to connect (502), but only once the check has passed does the gateway dial.
        expect(yield* Fiber.join(tunnel)).toContain("502")
        expect((yield* Fiber.join(forward)).status).toBe(502)
        expect(yield* Ref.get(dialled)).toEqual(["198.51.100.7:9099", "198.51.100.7:9099"])
        // The first report decides; a second (the agent's, say) changes nothing.
        expect(yield* Effect.promise(() => reportPreflight(port, HELD, { ok: false, check: "egress", detail: "late" }))).toBe(409)
      }).pipe(Effect.scoped)
    })

    it.live("a failed check refuses every request of the run, its box actions too; other runs go on", () => {
      const paths = heldDeployment()
      return Effect.gen(function*() {
        const dialled = yield* Ref.make<ReadonlyArray<string>>([])
        const { port } = yield* serve(paths, Dialer.layerRecording({}, dialled), live)
        const held = yield* Effect.fork(connect(port, "198.51.100.7:9099", { "Proxy-Authorization": auth(HELD) }))
        yield* Effect.sleep("200 millis")
        expect(yield* Effect.promise(() => reportPreflight(port, HELD, { ok: false, check: "egress", detail: "a direct connection opened" }))).toBe(200)
        const refused = yield* Fiber.join(held)
        expect(refused).toContain("403")
        expect(refused).toContain(`"why":"preflight"`)
        expect(refused).toContain("failed its preflight (a direct connection opened)")
        expect(yield* connect(port, "198.51.100.7:9099", { "Proxy-Authorization": auth(HELD) })).toContain("403")
        expect(yield* action(port, HELD)).toBe(403)
        expect(yield* Ref.get(dialled)).toEqual([])
        // TOKEN's run passed its check (serve reported it): it is not held, and not refused.
        expect(yield* connect(port, "198.51.100.7:9099", { "Proxy-Authorization": auth(TOKEN) })).toContain("502")
        expect(yield* action(port, TOKEN)).not.toBe(403)
      }).pipe(Effect.scoped)
    })

    it.live("no report within 5 s fails the run's preflight: its held request is refused then, not before", () => {
      const paths = heldDeployment()
      return Effect.gen(function*() {
        const dialled = yield* Ref.make<ReadonlyArray<string>>([])
        const { port } = yield* serve(paths, Dialer.layerRecording({}, dialled), live)
        const started = Date.now()
        const answer = yield* get(port, "http://198.51.100.7:9099/", { "Proxy-Authorization": auth(HELD) })
        const waited = Date.now() - started
        expect(answer.status).toBe(403)
        expect(answer.body).toContain("reported no preflight result within 5 s")
        expect(waited).toBeGreaterThanOrEqual(4_900)
        expect(yield* Ref.get(dialled)).toEqual([])
        // Decided: a report now is too late.
        expect(yield* Effect.promise(() => reportPreflight(port, HELD))).toBe(409)
      }).pipe(Effect.scoped)
    })
  })

  it.live("never proxies to itself, even when a rule names loopback", () => {
    const paths = deployment(`[[allow]]\nhosts = ["127.0.0.1", "loop.inside.test"]\nscope = ["org/alice"]\nports = [1, 65535]\n`)
    return Effect.gen(function*() {
      const dialled = yield* Ref.make<ReadonlyArray<string>>([])
      const { port } = yield* serve(paths, Dialer.layerRecording({ "loop.inside.test": ["127.0.0.1"] }, dialled))
      fs.writeFileSync(layout(paths).orgToml, `[[allow]]\nhosts = ["127.0.0.1", "loop.inside.test"]\nscope = ["org/alice"]\nports = [${port}]\n`)
      expect(yield* connect(port, `127.0.0.1:${port}`, { "Proxy-Authorization": auth(TOKEN) })).toContain("403")
      expect(yield* connect(port, `loop.inside.test:${port}`, { "Proxy-Authorization": auth(TOKEN) })).toContain("403")
      expect(yield* Ref.get(dialled)).toEqual([])
    }).pipe(Effect.scoped)
  })

  it.live("an oversized header gets 431 and the gateway keeps serving", () => {
    const paths = deployment("")
    return Effect.gen(function*() {
      const { port } = yield* serve(paths, Dialer.layer)
      const r = yield* connect(port, "198.51.100.7:443", { "X-Big": "a".repeat(64 * 1024) })
      expect(r).toContain("431")
      expect((yield* get(port, "/healthz")).status).toBe(200)
    }).pipe(Effect.scoped)
  })

  it.live("tunnels and forwards to an allowed outside host (a network namespace of the test)", () =>
    Effect.gen(function*() {
      const outside = yield* Effect.acquireRelease(Effect.promise(() => makeOutsideHost()), (o) => Effect.sync(o.close))
      const paths = deployment(`[[allow]]\nhosts = ["198.51.100.7"]\nscope = ["org/alice"]\nports = [${outside.port}, ${outside.httpPort}]\n`)
      const { port } = yield* serve(paths, Dialer.layer)
      const tunnel = yield* connect(port, `${outside.address}:${outside.port}`, { "Proxy-Authorization": auth(TOKEN) })
      expect(tunnel).toContain("200 Connection Established")
      expect(tunnel).toContain(outside.greeting)
      const r = yield* get(port, `http://${outside.address}:${outside.httpPort}/x?q=1`, { "Proxy-Authorization": auth(TOKEN), "X-Keep": "yes" })
      expect(r.status).toBe(200)
      const echoed = JSON.parse(r.body)
      expect(echoed.greeting).toBe(outside.greeting)
      expect(echoed.path).toBe("/x?q=1")
      expect(echoed.headers["x-keep"]).toBe("yes")
      // The run token is the gateway's business, never the upstream's.
      expect(echoed.headers["proxy-authorization"]).toBeUndefined()
      // The tunnel's audit line counts what went each way (written once the tunnel closed).
      const auditDir = layout(paths).auditDir
      const isTunnel = (r: AuditRecord) => r.method === "CONNECT" && r.port === outside.port
      const lines = yield* Effect.promise(() => auditedOnce(auditDir, (all) => all.some(isTunnel)))
      expect(lines.find(isTunnel)).toMatchObject({ bytes_up: 0, bytes_down: Buffer.byteLength(`${outside.greeting}\n`) })
    }).pipe(Effect.scoped))
})
