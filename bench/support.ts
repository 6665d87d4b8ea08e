import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import type * as net from "node:net"
import * as tls from "node:tls"
import { SENTINEL } from "../src/contract/constants.js"

/** One line of the bench table: a figure of roster's path against its baseline, measured in the same run. */
export interface Row {
  readonly metric: string
  readonly roster: number
  readonly baseline: number | null
  readonly unit: string
  /** How to read it against the goal: roster - baseline, roster / baseline, or roster alone. */
  readonly compare: "added" | "ratio" | "absolute" | "share"
  readonly goal: string
  readonly pass: boolean
  readonly spread?: string
  /** A figure shown beside the others with no goal of its own: not counted among the goals. */
  readonly reported?: true
}

/** A smoke pass (CI): every bench runs once, with the smallest counts and runc only — it shows they run, not how fast. */
export const smoke = process.env.BENCH_SMOKE === "1"
export const quick = smoke || process.env.BENCH_QUICK === "1"

/** The warm boxes the engine runs for the deployment whose config folder is `config`: container id and run id. */
export const warmBoxes = (config: string) =>
  spawnSync("docker", ["ps", "--format", "{{.ID}} {{.Label \"roster.run-id\"}}", "--filter", "label=roster.kind=warm", "--filter", `label=roster.deployment=${config}`], { encoding: "utf8" })
    .stdout.trim().split("\n").filter(Boolean).map((l) => {
      const [id = "", runId = ""] = l.split(" ")
      return { id, runId }
    })

/** What a running box holds in memory by the engine's own count (`docker stats`), in MiB; NaN when the engine does not say. */
export const boxMemoryMiB = (id: string) => {
  const stats = spawnSync("docker", ["stats", "--no-stream", "--format", "{{.MemUsage}}", id], { encoding: "utf8" }).stdout.trim()
  const used = /^([\d.]+)\s*([KMG]i?B)/.exec(stats)
  const unit: Record<string, number> = { KiB: 1 / 1024, KB: 1 / 1024, MiB: 1, MB: 1, GiB: 1024, GB: 1024 }
  return used ? Number(used[1]) * (unit[used[2] ?? ""] ?? Number.NaN) : Number.NaN
}

/** How long pi takes to load in its box after the preflight, with room (~0.5 s under runc, ~1 s under gVisor here). */
export const PI_LOADS_MS = 3_000

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/**
 * The warm box of `worker` of the deployment in `home`, settled: its preflight reported (pi starts
 * after it) and then the seconds pi takes to load — a warm box is one made before the run that takes
 * it, as after a person's last run; taken while pi still loads, its start would be counted.
 */
export const settledWarmBox = async (home: string, worker: string) => {
  const until = Date.now() + 120_000
  for (;;) {
    const runId = warmBoxes(path.join(home, "config"))[0]?.runId ?? ""
    const events = path.join(home, "data", "runs", worker, runId, "events.jsonl")
    if (runId !== "" && fs.existsSync(events) && fs.readFileSync(events, "utf8").includes(`"preflight"`)) return sleep(PI_LOADS_MS)
    if (Date.now() > until) throw new Error(`no warm box of ${worker} was made in 120 s (see ${home}/state/gateway.log)`)
    await sleep(100)
  }
}

/** Appends a row for scripts/bench.mjs to print (or prints it when run alone). */
export const emit = (row: Row) => {
  const out = process.env.BENCH_OUT
  if (out) fs.appendFileSync(out, `${JSON.stringify(row)}\n`)
  else console.log(JSON.stringify(row))
}

export const percentile = (xs: ReadonlyArray<number>, p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN
}

/**
 * A keep-alive HTTP/1.1 client on one socket: each `get` writes a request and resolves when the
 * whole answer is in (content-length or chunked). Small and exact, so both paths pay the same client.
 */
const MODEL_BODY = JSON.stringify({ model: "claude-bench-1", max_tokens: 64, messages: [{ role: "user", content: "Say hello in one word." }] })
const MODEL_REQUEST = (host: string) =>
  `POST /v1/messages HTTP/1.1\r\nHost: ${host}\r\nConnection: keep-alive\r\nx-api-key: ${SENTINEL}\r\nanthropic-version: 2023-06-01\r\n` +
  `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(MODEL_BODY)}\r\n\r\n${MODEL_BODY}`

/** A model's answer to it: a message with its usage (what the gateway meters). */
export const MODEL_ANSWER = JSON.stringify({
  id: "msg_bench", type: "message", role: "assistant", model: "claude-bench-1", content: [{ type: "text", text: "Hello." }],
  stop_reason: "end_turn", usage: { input_tokens: 14, output_tokens: 3 }
})

export const rawClient = (socket: net.Socket | tls.TLSSocket, host: string) => {
  let buffer = Buffer.alloc(0)
  let waiting: ((ok: boolean) => void) | undefined
  const complete = () => {
    const head = buffer.indexOf("\r\n\r\n")
    if (head < 0) return false
    const headers = buffer.subarray(0, head).toString("latin1").toLowerCase()
    const body = buffer.subarray(head + 4)
    const length = /content-length: *(\d+)/.exec(headers)
    if (length) {
      const n = Number(length[1])
      if (body.length < n) return false
      buffer = body.subarray(n)
      return true
    }
    const end = body.indexOf("0\r\n\r\n")
    if (end < 0) return false
    buffer = body.subarray(end + 5)
    return true
  }
  socket.on("data", (c: Buffer) => {
    buffer = Buffer.concat([buffer, c])
    if (waiting && complete()) {
      const w = waiting
      waiting = undefined
      w(true)
    }
  })
  socket.on("close", () => waiting?.(false))
  return {
    get: (path: string) =>
      new Promise<void>((resolve, reject) => {
        waiting = (ok) => (ok ? resolve() : reject(new Error("the connection closed mid-answer")))
        socket.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: keep-alive\r\n\r\n`)
      }),
    /** A model call as pi's SDK sends it: POST /v1/messages, the sentinel in x-api-key, a JSON body. */
    model: () =>
      new Promise<void>((resolve, reject) => {
        waiting = (ok) => (ok ? resolve() : reject(new Error("the connection closed mid-answer")))
        socket.write(MODEL_REQUEST(host))
      }),
    close: () => socket.destroy()
  }
}

/** A TLS connection straight to the upstream (the baseline). */
/**
 * The TLS sessions a client keeps to resume with, by where it connects (undici and Node's agents
 * keep them so): pass one to reuse sessions, as pi's client would; none, a full handshake each time.
 */
export type Sessions = Map<string, Buffer>

const keep = (s: tls.TLSSocket, sessions: Sessions | undefined, key: string) => {
  if (sessions) s.on("session", (ticket: Buffer) => sessions.set(key, ticket))
}

export const directTls = (port: number, ca: string, sessions?: Sessions) =>
  new Promise<tls.TLSSocket>((resolve, reject) => {
    const key = `direct:${port}`
    const session = sessions?.get(key)
    const s = tls.connect({ host: "127.0.0.1", port, ca: [ca], ALPNProtocols: ["http/1.1"], ...(session ? { session } : {}) })
    keep(s, sessions, key)
    s.once("secureConnect", () => resolve(s))
    s.once("error", reject)
  })

/** What a box's client does: CONNECT through the gateway with its token, then TLS to `host` inside. */
export const tunnelTls = (gatewayPort: number, token: string, host: string, ca: string, sessions?: Sessions) =>
  new Promise<tls.TLSSocket>((resolve, reject) => {
    const req = http.request({
      host: "127.0.0.1", port: gatewayPort, method: "CONNECT", path: `${host}:443`,
      headers: { "proxy-authorization": `Basic ${Buffer.from(`${token}:x`).toString("base64")}` }
    })
    req.once("connect", (res, socket) => {
      if (res.statusCode !== 200) return reject(new Error(`CONNECT answered ${res.statusCode}`))
      const key = `tunnel:${gatewayPort}:${host}`
      const session = sessions?.get(key)
      const s = tls.connect({ socket, servername: host, ca: [ca], ALPNProtocols: ["http/1.1"], ...(session ? { session } : {}) })
      keep(s, sessions, key)
      s.once("secureConnect", () => resolve(s))
      s.once("error", reject)
    })
    req.once("error", reject)
    req.end()
  })

export const ms = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e6
