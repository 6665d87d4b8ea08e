// The daemon with 20 live boxes, each streaming an SSE model answer through the gateway at once:
// the daemon's peak RSS, and how late each event reaches its box. A real daemon (`roster server
// start`), 20 workers with one queued task each (so the daemon owns and drains every box), the real
// box image with the scripted engine in pi's place (node in the box reads the stream), and a local
// TLS upstream behind a [[grant]] + [[route]]: the injecting path. The baseline: the same 20
// streams read straight from the upstream by this process. Needs Docker (scripts/ensure-host.sh).
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import type * as http from "node:http"
import * as https from "node:https"
import type * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, it } from "vitest"
import { SENTINEL } from "../src/contract/constants.js"
import { runFiles } from "../src/contract/runFiles.js"
import { freePort } from "../test/support/deployment.js"
import { buildPiImage, buildScriptedOnPi, GIT_IMAGE } from "../test/support/images.js"
import { makeTestTls } from "../test/support/testCa.js"
import { emit, percentile, quick, smoke } from "./support.js"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const bin = path.join(root, "bin/roster.js")
/** The real box image (node, git) with the scripted engine in pi's place, as the integration tests build it. */
const IMAGE = GIT_IMAGE
const HOST = "model.example.test"
const TUNNEL_HOST = "relay.example.test"
// A smoke pass (CI) runs 6: it shows the bench runs; the 150 MB bound is for 20.
const BOXES = smoke ? 6 : 20
/** One event every 5 ms per answer (a fast model's pace, 20 answers at once: 4,000 events/s through the gateway). */
const EVERY_MS = 5
const EVENTS = smoke ? 100 : quick ? 400 : 1_000

const now = () => performance.timeOrigin + performance.now()

/**
 * What each box runs (node, in the box): CONNECT through its gateway with its run token, then TLS
 * inside and POST /v1/messages, and for each event the time from the upstream's stamp to its
 * arrival; one JSON line, read from the run's transcript. Mode "grant": to the granted host (TLS
 * with the roster CA, NODE_EXTRA_CA_CERTS; the placeholder key, swapped by the gateway). Mode
 * "tunnel" (the baseline): to an [[allow]]ed host, TLS end to end with the upstream (its CA is
 * in the script), nothing terminated or injected — the same boxes, the same load, a plain relay.
 */
const boxClient = (upstreamCa: string) => `
const http = require("http"), tls = require("tls")
const mode = process.argv[1], host = mode === "tunnel" ? "${TUNNEL_HOST}" : "${HOST}"
const ca = ${JSON.stringify(upstreamCa)}
const proxy = new URL(process.env.HTTPS_PROXY)
const auth = Buffer.from(decodeURIComponent(proxy.username) + ":" + decodeURIComponent(proxy.password)).toString("base64")
const now = () => performance.timeOrigin + performance.now()
const req = http.request({ host: proxy.hostname, port: proxy.port, method: "CONNECT", path: host + ":443", agent: new http.Agent(), headers: { "proxy-authorization": "Basic " + auth } })
req.on("connect", (res, socket) => {
  if (res.statusCode !== 200) { console.log(JSON.stringify({ type: "bench_sse", mode, error: "CONNECT " + res.statusCode })); process.exit(1) }
  const trust = mode === "tunnel" ? { ca: [ca], checkServerIdentity: () => undefined } : {}
  const s = tls.connect({ socket, servername: host, ...trust }, () => {
    const body = JSON.stringify({ model: "claude-bench", max_tokens: 64, stream: true, messages: [{ role: "user", content: "go" }] })
    s.write("POST /v1/messages HTTP/1.1\\r\\nHost: " + host + "\\r\\nx-api-key: ${SENTINEL}\\r\\ncontent-type: application/json\\r\\ncontent-length: " + Buffer.byteLength(body) + "\\r\\n\\r\\n" + body)
  })
  const delays = []
  let text = "", started = 0
  s.on("data", (c) => {
    const t = now()
    text += c.toString("latin1")
    const re = /"text":"at (\\d+\\.\\d+)"/g
    let m, last = 0
    while ((m = re.exec(text)) !== null) { if (!started) started = t; delays.push(t - Number(m[1])); last = re.lastIndex }
    text = text.slice(last)
    if (text.includes("message_stop")) {
      console.log(JSON.stringify({ type: "bench_sse", mode, n: delays.length, started, ended: t, delays: delays.map((d) => Math.round(d * 100) / 100) }))
      process.exit(0)
    }
  })
  s.on("error", (e) => { console.log(JSON.stringify({ type: "bench_sse", mode, error: String(e) })); process.exit(1) })
})
req.on("error", (e) => { console.log(JSON.stringify({ type: "bench_sse", mode, error: String(e) })); process.exit(1) })
req.end()
`

/** An Anthropic Messages stream: message_start, one text delta per tick carrying its write time, message_stop. */
const sse = (event: string, data: object) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`
const startAnswer = (res: http.ServerResponse) => {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
  res.write(sse("message_start", { type: "message_start", message: { id: "msg_bench", role: "assistant", model: "claude-bench", usage: { input_tokens: 5, output_tokens: 1 } } }))
}
const tick = (res: http.ServerResponse) =>
  res.write(sse("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: `at ${now().toFixed(3)}` } }))
const endAnswer = (res: http.ServerResponse) => {
  res.write(sse("message_delta", { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: EVENTS } }))
  res.end(sse("message_stop", { type: "message_stop" }))
}

/**
 * Holds every answer until `count` requests are in, then streams them all at once, one event per
 * answer every EVERY_MS: the streams overlap by construction, so all the boxes are live together.
 */
const streamAllTogether = (count: number) => {
  const waiting: Array<http.ServerResponse> = []
  return (res: http.ServerResponse) => {
    startAnswer(res)
    waiting.push(res)
    if (waiting.length < count) return
    const answers = waiting.splice(0)
    let sent = 0
    const timer = setInterval(() => {
      if (sent++ >= EVENTS) {
        clearInterval(timer)
        for (const a of answers) endAnswer(a)
        return
      }
      for (const a of answers) tick(a)
    }, EVERY_MS)
  }
}

const sh = (cmd: string, args: ReadonlyArray<string>, env: NodeJS.ProcessEnv, input?: string) => {
  const r = spawnSync(cmd, args, { env, encoding: "utf8", input, maxBuffer: 64 * 1024 * 1024 })
  if (r.status !== 0) throw new Error(`${cmd} ${args.slice(0, 3).join(" ")} … exited ${r.status}: ${r.stderr}`)
  return r.stdout
}

/** The daemon's resident memory now, from /proc (MB). */
const rssMb = (pid: number) => {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))
  return Number(m?.[1] ?? 0) / 1024
}

/** The daemon's CPU time so far (user + system, s), from /proc. */
const cpuSeconds = (pid: number) => {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? []
  return (Number(fields[11]) + Number(fields[12])) / 100
}

interface BoxResult {
  readonly mode: "grant" | "tunnel"
  readonly n: number
  readonly started: number
  readonly ended: number
  readonly delays: ReadonlyArray<number>
  readonly error?: string
}

/** Each task's run's bench line, from the runs' transcripts. */
const boxResults = (home: string): Array<BoxResult> => {
  const runs = path.join(home, "data", "runs")
  if (!fs.existsSync(runs)) return []
  return fs.readdirSync(runs).flatMap((worker) => fs.readdirSync(path.join(runs, worker)).map((run) => runFiles(path.join(runs, worker, run)).transcript))
    .filter((f) => fs.existsSync(f))
    .flatMap((f) => fs.readFileSync(f, "utf8").split("\n").filter((l) => l.startsWith(`{"type":"bench_sse"`)).map((l) => JSON.parse(l) as BoxResult))
}

describe("the daemon with 20 live boxes", () => {
  let env: NodeJS.ProcessEnv
  let home = ""
  let orgToml = ""
  /** org.toml with `[box] runtime` set: each task's box reads it when it starts. */
  const useRuntime = (runtime: "runc" | "runsc") =>
    fs.writeFileSync(path.join(home, "config", "org.toml"), `${orgToml}[box]\nruntime = "${runtime}"\n`)
  let upstream: https.Server
  let upstreamCa = ""
  let upstreamPort = 0
  let onAnswer: (res: http.ServerResponse) => void = () => undefined

  beforeAll(async () => {
    home = fs.mkdtempSync(path.join(os.tmpdir(), "roster-bench-daemon-"))
    env = { ...process.env, ROSTER_HOME: home, HOME: home }
    buildPiImage()
    buildScriptedOnPi()
    const tlsFiles = await makeTestTls("127.0.0.1")
    upstreamCa = tlsFiles.caPem
    fs.writeFileSync(path.join(home, "upstream-ca.crt"), tlsFiles.caPem)
    upstream = https.createServer({ cert: tlsFiles.certPem, key: tlsFiles.keyPem }, (req, res) => {
      req.resume()
      req.on("end", () => onAnswer(res))
    })
    await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r))
    upstreamPort = (upstream.address() as net.AddressInfo).port

    sh(bin, ["init"], env)
    const workers = Array.from({ length: BOXES }, (_, i) => `w${String(i + 1).padStart(2, "0")}`)
    for (const w of workers) sh(bin, ["worker", "add", w], env)
    sh(bin, ["connection", "add", "anthropic"], env, "sk-ant-bench-not-real\n")
    orgToml = [
      "[engine]", `image = "${IMAGE}"`,
      "[gateway]", `port = ${await freePort()}`, `upstream_ca_file = "${path.join(home, "upstream-ca.crt")}"`,
      "[supervisor]", `concurrency = ${BOXES}`,
      "[[grant]]", `name = "model"`, `hosts = ["${HOST}"]`, `scope = ["org/*"]`, `credential = "anthropic"`,
      "[[route]]", `host = "${HOST}"`, `upstream = "https://127.0.0.1:${upstreamPort}"`,
      "[[allow]]", `hosts = ["${TUNNEL_HOST}"]`, `scope = ["org/*"]`,
      "[[route]]", `host = "${TUNNEL_HOST}"`, `upstream = "https://127.0.0.1:${upstreamPort}"`
    ].join("\n") + "\n"
    useRuntime("runc")
    // BENCH_DAEMON_FLAGS="--max-semi-space-size=8 …": the daemon with other V8 flags (it inherits its starter's).
    const flags = process.env.BENCH_DAEMON_FLAGS
    if (flags) sh(process.execPath, [...flags.split(" "), bin, "server", "start"], env)
    else sh(bin, ["server", "start"], env)
  }, 900_000)

  afterAll(() => {
    if (home) spawnSync(bin, ["server", "stop"], { env })
    upstream?.close()
  })

  /** One round: a task per worker, all 20 answers streamed together; what the boxes measured and the daemon's CPU meanwhile. */
  const round = async (mode: BoxResult["mode"], cpuAt: ReadonlyArray<readonly [number, number]>) => {
    const seen = boxResults(home).length
    // Only this round's boxes: an earlier round (another runtime) left results of the same mode.
    const since = now()
    onAnswer = streamAllTogether(BOXES)
    const prompt = `!node -e "eval(Buffer.from('${Buffer.from(boxClient(upstreamCa)).toString("base64")}','base64').toString())" ${mode}`
    for (let i = 1; i <= BOXES; i++) sh(bin, ["task", "add", `w${String(i).padStart(2, "0")}`, prompt], env)
    const deadline = Date.now() + 300_000
    let results: Array<BoxResult> = []
    // Watched through the transcripts (a read each), not the CLI: a CLI start every half second
    // would take a core's worth of CPU from the boxes and the daemon while they stream.
    while (Date.now() < deadline && (results = boxResults(home).filter((r) => r.mode === mode && r.started >= since)).length < BOXES) await new Promise((r) => setTimeout(r, 500))
    const failed = results.filter((r) => r.error !== undefined)
    if (results.length !== BOXES || failed.length > 0) {
      throw new Error(`${mode}: ${results.length} of ${BOXES} boxes reported (${failed.map((f) => f.error).join("; ")}); ${seen} before; see ${home}`)
    }
    // Before the next round (or the end), every task is over: no box of this one is left to compete.
    while (Date.now() < deadline && (JSON.parse(sh(bin, ["task", "list", "--json"], env)) as Array<{ status: string }>).some((t) => t.status === "running" || t.status === "queued")) {
      await new Promise((r) => setTimeout(r, 500))
    }
    const from = Math.min(...results.map((r) => r.started))
    const to = Math.max(...results.map((r) => r.ended))
    const during = cpuAt.filter(([t]) => t >= from && t <= to)
    return {
      delays: results.flatMap((r) => r.delays),
      // All 20 live at once: every stream began before the first one ended.
      together: Math.max(...results.map((r) => r.started)) < Math.min(...results.map((r) => r.ended)),
      // The daemon's share of one core while the answers streamed.
      busy: during.length > 1 ? (during.at(-1)![1] - during[0]![1]) / ((during.at(-1)![0] - during[0]![0]) / 1000) : Number.NaN
    }
  }

  /** Both rounds under `runtime`, sampling the daemon's RSS and CPU throughout; the rows named with `label`. */
  const measureUnder = async (runtime: "runc" | "runsc", label: string) => {
    useRuntime(runtime)
    const pid = (JSON.parse(sh(bin, ["server", "status", "--json"], env)) as { pid: number }).pid
    const before = rssMb(pid)
    let peak = before
    const cpuAt: Array<readonly [number, number]> = []
    const sampler = setInterval(() => {
      peak = Math.max(peak, rssMb(pid))
      cpuAt.push([now(), cpuSeconds(pid)])
    }, 20)
    const [tunnel, grant] = await (async () => [await round("tunnel", cpuAt), await round("grant", cpuAt)] as const)()
      .finally(() => clearInterval(sampler))
    const max = (xs: ReadonlyArray<number>) => xs.reduce((a, b) => Math.max(a, b), 0)
    emit({
      metric: `daemon, ${BOXES} live boxes${label} streaming at once: peak RSS`, roster: peak, baseline: null, unit: "MB", compare: "absolute",
      goal: "<= 150 MB", pass: peak <= 150 && grant.together && tunnel.together,
      spread: `${before.toFixed(0)} MB before the tasks; all ${BOXES} streaming together: ${grant.together && tunnel.together}`
    })
    const line = (r: typeof grant) => `p50 ${percentile(r.delays, 50).toFixed(2)} p99 ${percentile(r.delays, 99).toFixed(2)}, daemon ${(r.busy * 100).toFixed(0)} % of a core`
    emit({
      metric: `same${label}, event delay to the box, max (${grant.delays.length} events; baseline: the boxes through an [[allow]] tunnel)`,
      roster: max(grant.delays), baseline: max(tunnel.delays), unit: "ms", compare: "absolute",
      goal: "<= 10 ms", pass: max(grant.delays) <= 10 && grant.delays.length === BOXES * EVENTS,
      spread: `injecting path ${line(grant)}; tunnel ${line(tunnel)}`
    })
  }

  it("20 boxes stream an answer each through the gateway at once: the daemon's peak RSS, each event's delay", async () => {
    await measureUnder("runc", "")
    if (!smoke) await measureUnder("runsc", " under gVisor (runsc)")
  }, 1_800_000)
})
