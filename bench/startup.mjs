#!/usr/bin/env node
// CLI start-up: the median wall time of `roster --version`, `roster --help` and `roster worker run
// --help` (answered without loading the program), and of `roster worker` (the same kind of page,
// printed by the program loaded, from V8's code cache and without), against bare Node, measured in
// the same run, alternating.
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { binFlags, CA_BUNDLE, dropUnfloored, officialNode, unflooredBin } from "./otherNode.mjs"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const bin = path.join(root, "bin/roster.js")
const runs = process.env.BENCH_SMOKE === "1" ? 2 : process.env.BENCH_QUICK === "1" ? 5 : 15
const env = { ...process.env, ROSTER_HOME: path.join(os.tmpdir(), "roster-bench-home") }

const once = (cmd, args, extra = {}) => {
  const t = process.hrtime.bigint()
  const r = spawnSync(cmd, args, { cwd: root, env: { ...env, ...extra }, stdio: "ignore" })
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} exited ${r.status}`)
  return Number(process.hrtime.bigint() - t) / 1e6
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const samples = { node: [], version: [], help: [], command: [], program: [], cold: [] }
for (let i = 0; i < runs; i++) {
  samples.node.push(once(process.execPath, ["-e", "0"]))
  samples.version.push(once(bin, ["--version"]))
  samples.help.push(once(bin, ["--help"]))
  samples.command.push(once(bin, ["worker", "run", "--help"]))
  samples.program.push(once(bin, ["worker"]))
  // The first start after an install or upgrade: no code cache yet (and it writes one).
  samples.cold.push(once(bin, ["worker"], { XDG_CACHE_HOME: fs.mkdtempSync(path.join(os.tmpdir(), "roster-bench-cache-")) }))
}
const emit = (row) => (process.env.BENCH_OUT ? fs.appendFileSync(process.env.BENCH_OUT, `${JSON.stringify(row)}\n`) : console.log(JSON.stringify(row)))
// The goal is for --version and --help; a command that loads the program is reported beside them.
const rows = [
  ["roster --version", samples.version, true],
  ["roster --help", samples.help, true],
  ["roster worker run --help (a command's page, the program not loaded)", samples.command, false],
  ["roster worker (its page printed by the program loaded)", samples.program, false],
  ["roster worker, first start (no code cache yet)", samples.cold, false]
]
for (const [name, xs, goal] of rows) {
  const roster = median(xs)
  emit({
    metric: name, roster, baseline: median(samples.node), unit: "ms", compare: "absolute", goal: goal ? "<= 250 ms wall" : "reported",
    pass: goal ? roster <= 250 : true, ...(goal ? {} : { reported: true }),
    spread: `min ${Math.min(...xs).toFixed(0)} max ${Math.max(...xs).toFixed(0)}, n=${runs}`
  })
}

// The Node under the CLI: Node 20 (past its end of life; roster refuses it, so a copy of bin/roster.js without
// the floor) against this Node, each with and without NODE_EXTRA_CA_CERTS — Node 20 parses that bundle at every
// start, Node 22+ at the first TLS connection. Same flags as bin/roster.js's first line, alternating.
const NODE20 = "20.20.2"
const old = officialNode(NODE20)
const lifted = unflooredBin(root)
const flags = binFlags(root)
const nodes = { old: [], now: [], oldCa: [], nowCa: [] }
const programs = { old: [], now: [], oldCa: [], nowCa: [] }
const ca = { NODE_EXTRA_CA_CERTS: CA_BUNDLE }
for (let i = 0; i < runs; i++) {
  nodes.old.push(once(old, [...flags, lifted, "--version"]))
  nodes.now.push(once(process.execPath, [...flags, bin, "--version"]))
  nodes.oldCa.push(once(old, [...flags, lifted, "--version"], ca))
  nodes.nowCa.push(once(process.execPath, [...flags, bin, "--version"], ca))
  programs.old.push(once(old, [...flags, lifted, "worker"]))
  programs.now.push(once(process.execPath, [...flags, bin, "worker"]))
  programs.oldCa.push(once(old, [...flags, lifted, "worker"], ca))
  programs.nowCa.push(once(process.execPath, [...flags, bin, "worker"], ca))
}
dropUnfloored(lifted)
const now = process.version
const compared = [
  [`roster --version on Node ${NODE20} against ${now}`, nodes.old, nodes.now],
  [`roster --version on Node ${NODE20} against ${now}, NODE_EXTRA_CA_CERTS set (${CA_BUNDLE})`, nodes.oldCa, nodes.nowCa],
  [`roster --version on ${now}: NODE_EXTRA_CA_CERTS set against unset`, nodes.nowCa, nodes.now],
  [`roster worker (the program loaded) on Node ${NODE20} against ${now}`, programs.old, programs.now],
  [`roster worker (the program loaded) on Node ${NODE20} against ${now}, NODE_EXTRA_CA_CERTS set`, programs.oldCa, programs.nowCa]
]
for (const [name, xs, base] of compared) {
  emit({
    metric: name, roster: median(xs), baseline: median(base), unit: "ms", compare: "ratio", goal: "reported", pass: true, reported: true,
    spread: `min ${Math.min(...xs).toFixed(0)} max ${Math.max(...xs).toFixed(0)}, n=${runs}`
  })
}
