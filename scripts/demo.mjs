#!/usr/bin/env node
// roster's demo on a fresh machine: installs what is missing, builds roster and the box image,
// starts the daemon, and runs a worker in a locked-down box twice — once to its own exit, once
// into its ceiling — then shows what the box could and could not do.
//
// This increment's box runs the SCRIPTED engine (busybox, no model): the real pi image and the
// rehearsal model arrive with the box-image issue. Everything else is the real thing: the real
// Docker engine, the real gateway, the real lockdown.
import { execFileSync, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const home = path.join(root, ".roster-dev", "demo")
const IMAGE = "roster-scripted:1"
const env = { ...process.env, ROSTER_HOME: home }
const bold = (s) => (process.stdout.isTTY ? `\x1b[1m${s}\x1b[0m` : s)
const step = (s) => console.log(`\n${bold(`== ${s}`)}`)

const sh = (cmd, args, opts = {}) => {
  const r = spawnSync(cmd, args, { cwd: root, stdio: "inherit", env, ...opts })
  if (r.status !== 0) {
    console.error(`demo: ${cmd} ${args.join(" ")} failed (exit ${r.status})`)
    process.exit(1)
  }
}
const roster = (args, { allowFail = false } = {}) => {
  const r = spawnSync(process.execPath, [path.join(root, "bin/roster.js"), ...args], { cwd: root, env, encoding: "utf8" })
  if (r.status !== 0 && !allowFail) {
    console.error(r.stdout, r.stderr)
    console.error(`demo: roster ${args.join(" ")} failed (exit ${r.status})`)
    process.exit(1)
  }
  return r
}

const newest = (dir) => fs.readdirSync(dir).filter((f) => /^\d{4}-/.test(f)).sort().at(-1)

step("1/6 this machine: Docker engine, iptables, busybox")
if (!fs.existsSync(path.join(root, "node_modules"))) sh("npm", ["ci", "--no-audit", "--no-fund"])
sh(path.join(root, "scripts/ensure-host.sh"), [])

step("2/6 build roster")
const newestMtime = (dir) =>
  fs.readdirSync(dir, { recursive: true }).reduce((m, f) => Math.max(m, fs.statSync(path.join(dir, String(f))).mtimeMs), 0)
const built = path.join(root, "dist/src/bin.js")
if (!fs.existsSync(built) || fs.statSync(built).mtimeMs < newestMtime(path.join(root, "src"))) {
  sh("npx", ["tsc", "-p", "tsconfig.build.json"])
  console.log("built dist/")
} else console.log("dist/ is up to date")

step("3/6 the box image")
const present = spawnSync("docker", ["image", "inspect", IMAGE], { stdio: "ignore" }).status === 0
if (present) console.log(`${IMAGE} is present (no rebuild)`)
else roster(["box", "build-scripted", "--tag", IMAGE])

step("4/6 a deployment in .roster-dev/demo and its daemon")
roster(["init", "--worker", "alice"])
fs.writeFileSync(path.join(home, "config", "org.toml"), [
  "# the demo's org.toml (the full commented template is what `roster init` writes)",
  "[engine]", `image = "${IMAGE}"`,
  "[box]", "ceiling_min = 5",
  "[gateway]", "port = 7390", ""
].join("\n"))
const started = roster(["server", "start"])
process.stdout.write(started.stdout)

// A model credential is required before any box starts. The demo's engine calls no model, so a
// placeholder stands in; it is still proven never to enter the box.
const DEMO_KEY = "sk-ant-demo-placeholder-never-in-the-box"
env.ANTHROPIC_API_KEY = process.env.ANTHROPIC_API_KEY ?? DEMO_KEY

step("5/6 run alice in a box, to its own exit")
const probe = [
  "echo \"I am uid $(id -u) in $(pwd)\"",
  "grep -E '^(CapEff|NoNewPrivs):' /proc/self/status",
  "if nc -w 2 192.0.2.1 443 </dev/null 2>/dev/null; then echo 'direct egress: CONNECTED (bug!)'; else echo 'direct egress to 192.0.2.1:443: refused (no way out but the gateway)'; fi",
  "T=${HTTP_PROXY#http://}; T=${T%%:*}; P=${HTTP_PROXY##*:}",
  "printf 'gateway asked for example.com:443 -> '; (printf 'CONNECT example.com:443 HTTP/1.1\\r\\nProxy-Authorization: Basic %s\\r\\n\\r\\n' \"$(printf '%s:x' \"$T\" | base64 | tr -d '\\n')\"; sleep 1) | nc -w 3 host.docker.internal \"$P\" | head -n 1",
  "echo \"ANTHROPIC_API_KEY in the box: $ANTHROPIC_API_KEY\"",
  "echo \"note to self\" > /pihome/store/notes.txt; echo 'saved a note in my store'"
].join("\n")
const storeDir = path.join(home, "data", "stores", "alice")
fs.mkdirSync(storeDir, { recursive: true })
fs.writeFileSync(path.join(storeDir, "demo-probe.sh"), `${probe}\n`, { mode: 0o755 })
const first = roster(["worker", "run", "alice", "!sh /pihome/store/demo-probe.sh"], { allowFail: true })
process.stdout.write(first.stdout)
const runsDir = path.join(home, "data", "runs", "alice")
const firstRun = path.join(runsDir, newest(runsDir))
console.log(bold("\nwhat the box printed (stdout.jsonl):"))
for (const line of fs.readFileSync(path.join(firstRun, "stdout.jsonl"), "utf8").trim().split("\n")) console.log(`  | ${line}`)

step("6/6 run alice into her ceiling (3 s)")
const second = roster(["worker", "run", "alice", "--ceiling", "0.05", "!echo working forever; sleep 100000"], { allowFail: true })
process.stdout.write(second.stdout)
console.log(`roster exited ${second.status} (2 = ended by the ceiling)`)

const leftovers = execFileSync("docker", ["ps", "-aq", "--filter", "label=roster.run-id"]).toString().trim()
const everything = fs.readdirSync(firstRun, { recursive: true })
  .map((f) => path.join(firstRun, String(f))).filter((f) => fs.statSync(f).isFile())
  .some((f) => fs.readFileSync(f, "utf8").includes(env.ANTHROPIC_API_KEY))
console.log(bold("\nproof of the lockdown"))
console.log(`  boxes left running:            ${leftovers === "" ? "none" : leftovers}`)
console.log(`  host key anywhere in the run:  ${everything ? "FOUND (bug!)" : "nowhere (the box saw only the sentinel)"}`)
console.log(`  run records:                   ${firstRun}/run.json`)
console.log(`                                 ${path.join(runsDir, newest(runsDir))}/run.json`)
console.log(`  gateway audit:                 ${path.join(home, "state", "audit")}/`)
roster(["server", "stop"])
console.log("\nthe daemon was stopped; start it again with: ROSTER_HOME=.roster-dev/demo node bin/roster.js server start")
console.log("note: this box ran the scripted engine (no model). The real pi image comes with the box-image issue.")
