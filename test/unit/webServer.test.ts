import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as http from "node:http"
import { layout } from "../../src/config/Paths.js"
import { MemoryStore } from "../../src/memory/MemoryStore.js"
import { RunLog } from "../../src/run/RunLog.js"
import { serveWeb } from "../../src/web/server.js"
import { tempPaths, unitLayer, writeFixture } from "../support/harness.js"

interface Answer {
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  readonly body: Buffer
  readonly chunks: number
}

/** One request as a local process would send it (any Host and Origin it likes); the answer, or how the connection ended. */
const request = (port: number, o: { method?: string; path: string; headers?: Record<string, string>; body?: Buffer }) =>
  new Promise<Answer | { readonly failed: string }>((resolve) => {
    const req = http.request({ host: "127.0.0.1", port, method: o.method ?? "GET", path: o.path, headers: { host: `127.0.0.1:${port}`, ...o.headers } }, (res) => {
      const parts: Array<Buffer> = []
      res.on("data", (c: Buffer) => parts.push(c))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts), chunks: parts.length }))
      res.on("error", (e) => resolve({ failed: e.message }))
    })
    req.on("error", (e) => resolve({ failed: e.message }))
    req.end(o.body)
  })

describe("roster web's request bodies and downloads (a real HTTP server, in process)", () => {
  it.scoped("a 1 MiB POST, declared or chunked, with a forged Origin or none, is answered 413 and the server goes on", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    return Effect.gen(function*() {
      const { port } = yield* serveWeb({ port: 0 })
      const big = Buffer.alloc(1024 * 1024, "a")
      const origin = `http://127.0.0.1:${port}`
      for (const headers of [
        { origin, "content-type": "application/x-www-form-urlencoded" },
        { origin, "content-type": "application/x-www-form-urlencoded", "transfer-encoding": "chunked" },
        {}
      ]) {
        const answer = yield* Effect.promise(() => request(port, { method: "POST", path: "/tasks", headers, body: big }))
        expect("status" in answer ? answer.status : answer.failed, JSON.stringify(headers)).toBe(413)
      }
      // A body under the limit still reaches its handler (here: refused for having no session, as always).
      const small = yield* Effect.promise(() => request(port, { method: "POST", path: "/tasks", headers: { origin }, body: Buffer.from("worker=alice") }))
      expect("status" in small && small.status).toBe(401)
      const page = yield* Effect.promise(() => request(port, { path: "/login" }))
      expect("status" in page && page.status).toBe(200)
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.scoped("a run's transcript is sent as it is read, whole", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const runId = "2026-12-01-10-00-00-0000d00d"
    return Effect.gen(function*() {
      yield* (yield* RunLog).start({ runId, worker: "alice", kind: "box" })
      const transcript = `${layout(paths).runDir("alice", runId)}/stdout.jsonl`
      const lines = Array.from({ length: 40_000 }, (_, i) => JSON.stringify({ type: "line", i, pad: "x".repeat(100) })).join("\n")
      fs.writeFileSync(transcript, lines)
      const { port, url } = yield* serveWeb({ port: 0 })
      const login = yield* Effect.promise(() => request(port, { path: new URL(url).pathname + new URL(url).search }))
      const cookie = "status" in login ? String(login.headers["set-cookie"]?.[0] ?? "").split(";")[0] ?? "" : ""
      const answer = yield* Effect.promise(() => request(port, { path: `/runs/${runId}/transcript`, headers: { cookie } }))
      if (!("status" in answer)) return expect.fail(answer.failed)
      expect(answer.status).toBe(200)
      expect(answer.headers["content-disposition"]).toBe(`attachment; filename="${runId}.jsonl"`)
      expect(Number(answer.headers["content-length"])).toBe(Buffer.byteLength(lines))
      expect(answer.body.toString()).toBe(lines)
      expect(answer.chunks).toBeGreaterThan(1)
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.scoped("a worker's page shows its memory, pending entries marked, every note escaped", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    return Effect.gen(function*() {
      const memory = yield* MemoryStore
      yield* memory.add("alice", { text: "the deploy key lives in vault entry ops", scope: "worker", runId: null, pending: false }, { max_entries: 10, entry_max: 100 })
      const held = yield* memory.add("alice", { text: "<script>alert(1)</script> from a tainted run", scope: "worker", runId: null, pending: true }, { max_entries: 10, entry_max: 100 })
      const { port, url } = yield* serveWeb({ port: 0 })
      const login = yield* Effect.promise(() => request(port, { path: new URL(url).pathname + new URL(url).search }))
      const cookie = "status" in login ? String(login.headers["set-cookie"]?.[0] ?? "").split(";")[0] ?? "" : ""
      const page = yield* Effect.promise(() => request(port, { path: "/workers/alice", headers: { cookie } }))
      if (!("status" in page)) return expect.fail(page.failed)
      const text = page.body.toString()
      expect(page.status).toBe(200)
      expect(text).toContain("the deploy key lives in vault entry ops")
      expect(text).toContain(`<tr class="pending"><td><code>${held.id}</code> <span class="warn">pending</span>`)
      expect(text).toContain("&lt;script&gt;alert(1)&lt;/script&gt; from a tainted run")
      expect(text).not.toContain("<script>alert(1)")
      expect(text).toContain("1 pending")
      const none = yield* Effect.promise(() => request(port, { path: "/workers/nobody", headers: { cookie } }))
      expect("status" in none && none.status).toBe(404)
    }).pipe(Effect.provide(unitLayer(paths)))
  })
})
