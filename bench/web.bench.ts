// roster web's pages with 1,000 runs on disk: the time to answer each page (logged in, a fresh
// request), against a bare node server answering a page of the same size, alternating.
import { spawn, spawnSync, type ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, it } from "vitest"
import { freePort } from "../test/support/deployment.js"
import { emit, percentile, quick, smoke } from "./support.js"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const bin = path.join(root, "bin/roster.js")
const RUNS = 1_000

const get = (port: number, target: string, cookie = "") =>
  new Promise<{ ms: number; bytes: number; status: number }>((resolve, reject) => {
    const t = process.hrtime.bigint()
    const req = http.request({ host: "127.0.0.1", port, path: target, headers: { host: `127.0.0.1:${port}`, cookie }, agent: false }, (res) => {
      let bytes = 0
      res.on("data", (c: Buffer) => (bytes += c.length))
      res.on("end", () => resolve({ ms: Number(process.hrtime.bigint() - t) / 1e6, bytes, status: res.statusCode ?? 0 }))
    })
    req.once("error", reject)
    req.end()
  })

/** 1,000 runs of one worker: a record, a transcript of pi events, and three audited requests each. */
const fillRuns = (home: string) => {
  const day = new Date().toISOString().slice(0, 10)
  const audit: Array<string> = []
  const ids: Array<string> = []
  for (let i = 0; i < RUNS; i++) {
    const t = new Date(Date.now() - (RUNS - i) * 60_000)
    const id = `${t.toISOString().slice(0, 19).replace(/[T:]/g, "-")}-${i.toString(16).padStart(8, "0")}`
    ids.push(id)
    const dir = path.join(home, "data", "runs", "alice", id)
    fs.mkdirSync(dir, { recursive: true })
    fs.writeFileSync(path.join(dir, "run.json"), JSON.stringify({
      run_id: id, worker: "alice", kind: "box", task_id: null, started_at: t.toISOString(), finished_at: t.toISOString(),
      ended_by: "exit", exit_code: 0, error: null, final_text: "done"
    }))
    const events = [`{"type":"turn_start"}`, `{"type":"message_end","message":{"role":"user","content":[{"type":"text","text":"look at the box"}],"timestamp":${t.getTime()}}}`]
    for (let k = 0; k < 20; k++) {
      events.push(`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"step ${k}"},{"type":"toolCall","name":"bash","arguments":{"command":"ls"}}],"timestamp":${t.getTime() + k}}}`)
      events.push(`{"type":"tool_execution_end","toolName":"bash","result":{"content":[{"type":"text","text":"${"x".repeat(200)}"}]}}`)
    }
    fs.writeFileSync(path.join(dir, "stdout.jsonl"), `${events.join("\n")}\n`)
    for (let k = 0; k < 3; k++) {
      audit.push(JSON.stringify({
        time: t.toISOString(), run_id: id, subject: "org/alice", host: k === 2 ? "blocked.example.test" : "api.example.com", port: 443,
        method: "POST", path: "/v1/messages", status: k === 2 ? 403 : 200, injected: k !== 2, bytes_up: 1000, bytes_down: 2000, duration_ms: 300
      }))
    }
  }
  fs.mkdirSync(path.join(home, "state", "audit"), { recursive: true })
  fs.writeFileSync(path.join(home, "state", "audit", `${day}.jsonl`), `${audit.join("\n")}\n`)
  return ids
}

describe("roster web", () => {
  let web: ChildProcess
  let port = 0
  let cookie = ""
  let ids: Array<string> = []
  let bare: http.Server
  let barePort = 0
  let page = ""

  beforeAll(async () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), "roster-bench-web-"))
    const env = { ...process.env, ROSTER_HOME: home, HOME: home }
    spawnSync(bin, ["init"], { env })
    ids = fillRuns(home)
    port = await freePort()
    web = spawn(bin, ["web", "--port", String(port)], { env, stdio: ["ignore", "pipe", "inherit"] })
    const url = await new Promise<string>((resolve, reject) => {
      let out = ""
      web.stdout?.on("data", (c: Buffer) => {
        out += c.toString()
        const m = /(http:\/\/127\.0\.0\.1:\d+\/login\?token=[0-9a-f]+)/.exec(out)
        if (m?.[1]) resolve(m[1])
      })
      web.once("exit", (code) => reject(new Error(`roster web exited ${code}`)))
    })
    const login = await new Promise<http.IncomingMessage>((resolve) => http.get(url, resolve))
    cookie = String(login.headers["set-cookie"]?.[0] ?? "").split(";")[0] ?? ""
    page = (await new Promise<string>((resolve) =>
      http.get({ host: "127.0.0.1", port, path: "/runs", headers: { host: `127.0.0.1:${port}`, cookie } }, (res) => {
        let text = ""
        res.on("data", (c: Buffer) => (text += c.toString()))
        res.on("end", () => resolve(text))
      })))
    bare = http.createServer((_, res) => res.writeHead(200, { "content-type": "text/html" }).end(page))
    await new Promise<void>((resolve) => bare.listen(0, "127.0.0.1", resolve))
    barePort = (bare.address() as { port: number }).port
  }, 300_000)

  afterAll(() => {
    web?.kill("SIGTERM")
    bare?.close()
  })

  it("each page's answer with 1,000 runs on disk, against a bare server answering the runs page's bytes", async () => {
    const rounds = smoke ? 2 : quick ? 5 : 20
    const pages = ["/", "/runs", "/runs?page=20", `/runs/${ids[RUNS - 1]}`, "/tasks", "/talk", "/gateway"]
    for (const p of pages) {
      const times: Array<number> = []
      const base: Array<number> = []
      for (let i = 0; i < rounds + 2; i++) {
        const r = await get(port, p, cookie)
        if (r.status !== 200) throw new Error(`${p} answered ${r.status}`)
        const b = await get(barePort, "/")
        // The first two warm both up (the JIT, the page cache).
        if (i >= 2) {
          times.push(r.ms)
          base.push(b.ms)
        }
      }
      const p50 = percentile(times, 50)
      emit({
        metric: `web ${p.startsWith("/runs/") ? "/runs/<id> (40 pi events, 3 requests)" : p} (1,000 runs), p50`, roster: p50, baseline: percentile(base, 50), unit: "ms", compare: "absolute",
        goal: "≤ 100 ms", pass: p50 <= 100, spread: `p90 ${percentile(times, 90).toFixed(1)} ms`
      })
    }
  }, 300_000)
})
