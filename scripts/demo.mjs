#!/usr/bin/env node
// roster's demo on a fresh machine: installs what is missing, builds roster and the box image
// (offline when no registry answers), starts the daemon, and runs worker alice — the real pi in a
// locked-down box, its model calls through roster's gateway. With no model credential configured
// it talks to the REHEARSAL model (a scripted stand-in for Claude, on this machine), so the whole
// path runs anywhere; with one (ANTHROPIC_API_KEY, a vault connection, a pi login) it calls the real API.
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as net from "node:net"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { checkNode } from "./node-check.mjs"

checkNode()

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const home = path.join(root, ".roster-dev", "demo")
const IMAGE = "roster-box:1"
const GATEWAY_PORT = 7390
// A free port, not a fixed one: on a fixed port a daemon of another deployment answered for the
// rehearsal model once, and the demo failed with a gateway's 404 instead of saying why.
const REHEARSAL_PORT = await new Promise((resolve, reject) => {
  const probe = net.createServer()
  probe.once("error", reject)
  probe.listen(0, "127.0.0.1", () => {
    const { port } = probe.address()
    probe.close(() => resolve(port))
  })
})
const env = { ...process.env, ROSTER_HOME: home }
const tty = process.stdout.isTTY
const bold = (s) => (tty ? `\x1b[1m${s}\x1b[0m` : s)
const dim = (s) => (tty ? `\x1b[2m${s}\x1b[0m` : s)
const step = (s) => console.log(`\n${bold(`== ${s}`)}`)
const started = Date.now()

const fail = (msg) => {
  console.error(`demo: ${msg}`)
  process.exit(1)
}
const sh = (cmd, args) => {
  const r = spawnSync(cmd, args, { cwd: root, stdio: "inherit", env })
  if (r.status !== 0) fail(`${cmd} ${args.join(" ")} failed (exit ${r.status})`)
}
const roster = (args, { allowFail = false, inherit = false, extraEnv = {} } = {}) => {
  const r = spawnSync(path.join(root, "bin/roster.js"), args, {
    cwd: root, env: { ...env, ...extraEnv }, encoding: "utf8", stdio: inherit ? ["ignore", "inherit", "inherit"] : "pipe"
  })
  if (r.status !== 0 && !allowFail) fail(`roster ${args.join(" ")} failed (exit ${r.status})\n${r.stdout ?? ""}${r.stderr ?? ""}`)
  return r
}
step("1/6 this machine: Docker engine, iptables, debootstrap")
if (!fs.existsSync(path.join(root, "node_modules"))) sh("npm", ["ci", "--no-audit", "--no-fund"])
sh(path.join(root, "scripts/ensure-host.sh"), [])

step("2/6 build roster")
const newestMtime = (dir) =>
  fs.readdirSync(dir, { recursive: true }).reduce((m, f) => Math.max(m, fs.statSync(path.join(dir, String(f))).mtimeMs), 0)
const built = path.join(root, "dist/roster.cjs")
if (!fs.existsSync(built) || fs.statSync(built).mtimeMs < newestMtime(path.join(root, "src"))) {
  sh("npm", ["run", "--silent", "build"])
  console.log("built dist/")
} else console.log("dist/ is up to date")

step("3/6 the box image (pi 1.6 on Node 24)")
roster(["box", "build", "--if-changed", "--tag", IMAGE], { inherit: true })
roster(["box", "check", "--tag", IMAGE], { inherit: true })

step("4/6 a deployment in .roster-dev/demo, its daemon, and a model")
roster(["init", "--worker", "alice"])
const vault = JSON.parse(roster(["connection", "list", "--json"]).stdout).map((c) => c.name)
const realCredential = Boolean(process.env.ANTHROPIC_API_KEY) || vault.includes("anthropic") && !fs.existsSync(path.join(home, ".rehearsal-key")) ||
  fs.existsSync(path.join(os.homedir(), ".pi/agent/auth.json"))
let rehearsal
if (!realCredential) {
  // A placeholder key, so the injection is real and visible: the rehearsal model records what it gets.
  roster(["connection", "add", "anthropic", "--from-env", "DEMO_REHEARSAL_KEY"], { extraEnv: { DEMO_REHEARSAL_KEY: "sk-ant-rehearsal-demo-key-0000" } })
  fs.writeFileSync(path.join(home, ".rehearsal-key"), "the vault's anthropic key is the demo's placeholder\n")
  rehearsal = spawn(path.join(root, "bin/roster.js"), ["rehearsal", "--port", String(REHEARSAL_PORT)], { env, stdio: "ignore" })
  await new Promise((r) => setTimeout(r, 800))
  console.log(`no model credential configured: using the REHEARSAL model on 127.0.0.1:${REHEARSAL_PORT} (a scripted stand-in for Claude)`)
} else {
  // A placeholder left by an earlier rehearsal must not shadow the real credential (the vault wins).
  if (fs.existsSync(path.join(home, ".rehearsal-key"))) {
    roster(["connection", "rm", "anthropic"], { allowFail: true })
    fs.rmSync(path.join(home, ".rehearsal-key"))
  }
  console.log("a model credential is configured: alice talks to the real Anthropic API through the gateway")
}
fs.writeFileSync(path.join(home, "config", "org.toml"), [
  "# the demo's org.toml (roster init writes the full commented template)",
  "[engine]", `image = "${IMAGE}"`,
  // As root the demo shows what `roster init` as root sets up: box->host traffic pinned to the gateway port.
  "[box]", "ceiling_min = 5", `egress_lockdown = ${process.getuid?.() === 0}`,
  "[gateway]", `port = ${GATEWAY_PORT}`,
  "[[grant]]", `name = "anthropic"`, `hosts = ["api.anthropic.com"]`, `scope = ["org/*"]`, `credential = "anthropic"`,
  ...(rehearsal ? ["[[route]]", `host = "api.anthropic.com"`, `upstream = "http://127.0.0.1:${REHEARSAL_PORT}"`] : []),
  ""
].join("\n"))
fs.writeFileSync(path.join(home, "config", "workers", "alice", "worker.toml"), `model = "anthropic/claude-sonnet-4-5"\n[store]\nsnapshots = 5\n`)
roster(["server", "stop"], { allowFail: true })
process.stdout.write(roster(["server", "start"]).stdout)

const cleanup = () => {
  roster(["server", "stop"], { allowFail: true })
  rehearsal?.kill()
}
process.on("exit", cleanup)

step("5/6 alice runs in a box, to her own exit")
const prompt = "What system is your box running? Look, tell me, and say hello."
console.log(dim(`$ roster worker run alice "${prompt}"`))
// The conversation streams as it happens: alice's words, each tool call and what it gave back.
const first = roster(["worker", "run", "alice", prompt], { allowFail: true, inherit: true })
const runsDir = path.join(home, "data", "runs", "alice")
// alice's run: the newest folder with a record — the newest folder may be the warm box made after it (a folder
// of its own, without a record until a run takes it, removed when it is recycled as the ceiling run below does).
const recorded = (dir) =>
  fs.readdirSync(dir).filter((f) => /^\d{4}-/.test(f) && fs.existsSync(path.join(dir, f, "run.json")))
    .map((f) => ({ f, at: Date.parse(JSON.parse(fs.readFileSync(path.join(dir, f, "run.json"), "utf8")).started_at) }))
    .sort((a, b) => a.at - b.at || (a.f < b.f ? -1 : 1)).at(-1)?.f
const firstRun = recorded(runsDir)
if (!firstRun) {
  console.error(`alice's run left no run record in ${runsDir}: see the daemon's log, ${path.join(home, "state", "gateway.log")}`)
  process.exit(1)
}
const runDir = path.join(runsDir, firstRun)

step("6/6 and into her ceiling (1 s)")
const second = roster(["worker", "run", "alice", "--ceiling", "0.02", "Take your time."], { allowFail: true, inherit: true })
console.log(`roster exited ${second.status} (2 = ended by the ceiling)`)

// This deployment's boxes, a run's left behind apart from a warm box waiting for its worker's next run (labelled
// warm, still under the name it was made with): that one is by design, and goes with the daemon at the demo's end.
const boxesNow = spawnSync("docker", ["ps", "-a", "--filter", `label=roster.deployment=${path.join(home, "config")}`,
  "--format", '{{.ID}} {{.Names}} {{.Label "roster.kind"}} {{.Label "roster.run-id"}} {{.Label "roster.worker"}}'], { encoding: "utf8" }).stdout
  .trim().split("\n").filter((l) => l !== "").map((l) => {
    const [id, name, kind, runId, worker] = l.split(" ")
    return { id, worker, waiting: kind === "warm" && name === `roster-box-${runId}` }
  })
const leftovers = boxesNow.filter((b) => !b.waiting).map((b) => b.id).join(" ")
const waiting = boxesNow.filter((b) => b.waiting)
const warmWords = waiting.length === 0 ? "" : ` (${waiting.length} warm box${waiting.length === 1 ? "" : "es"} wait${waiting.length === 1 ? "s" : ""} for ${[...new Set(waiting.map((b) => `${b.worker}'s`))].join(" and ")} next run)`
const key = rehearsal ? "sk-ant-rehearsal-demo-key-0000" : process.env.ANTHROPIC_API_KEY
const files = fs.readdirSync(runDir, { recursive: true }).map((f) => path.join(runDir, String(f))).filter((f) => fs.statSync(f).isFile())
const leaked = key ? files.some((f) => fs.readFileSync(f, "utf8").includes(key)) : false
const audit = fs.readdirSync(path.join(home, "state", "audit")).flatMap((f) => fs.readFileSync(path.join(home, "state", "audit", f), "utf8").trim().split("\n"))
  .map((l) => JSON.parse(l)).filter((r) => r.run_id === path.basename(runDir))
console.log(bold("\nproof of the lockdown"))
console.log(`  the box's way out:             ${audit.length} gateway request(s): ${[...new Set(audit.map((r) => `${r.method} ${r.host}${r.path}${r.injected ? " [key injected]" : ""}`))].join(", ")}`)
console.log(`  the key anywhere in the run:   ${leaked ? "FOUND (bug!)" : "nowhere — the box held only a sentinel"}`)
console.log(`  boxes left running:            ${leftovers === "" ? "none" : leftovers}${warmWords}`)
console.log(`  the run record:                ${runDir}/run.json`)
console.log(`\ndone in ${Math.round((Date.now() - started) / 1000)} s. The daemon stops with the demo (its warm boxes with it); see everything again with:`)
console.log(`  ROSTER_HOME=.roster-dev/demo bin/roster.js runs show ${path.basename(runDir)}`)
process.exit(first.status === 0 && second.status === 2 && !leaked && leftovers === "" ? 0 : 1)
