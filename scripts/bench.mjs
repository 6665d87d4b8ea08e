#!/usr/bin/env node
// `npm run bench [-- --json] [-- --quick]`: every benchmark, each figure against a baseline
// measured in the same run, as one table (metric, roster, baseline, ratio, goal, pass/fail).
// It reports; it does not fail on a missed goal (a shared machine is noisy): read the table.
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const json = process.argv.includes("--json")
// --smoke (CI): each bench once with the smallest counts and runc only, to show they run; its figures are not for judging.
const smoke = process.argv.includes("--smoke")
const quick = smoke || process.argv.includes("--quick")
const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "roster-bench-out-")), "rows.jsonl")
const env = { ...process.env, BENCH_OUT: out, BENCH_QUICK: quick ? "1" : "0", BENCH_SMOKE: smoke ? "1" : "0" }

const say = (s) => json || process.stderr.write(`${s}\n`)
// --no-build: the build is current (.ci/run's tests have just made it).
let r
if (!process.argv.includes("--no-build")) {
  say("bench: building (the CLI bundle and the library the gateway bench runs)")
  r = spawnSync("npm", ["run", "--silent", "build"], { cwd: root, stdio: ["ignore", json ? "ignore" : "inherit", "inherit"] })
  if (r.status !== 0) process.exit(r.status ?? 1)
}
say(`bench: start-up${smoke ? " (smoke)" : quick ? " (quick)" : ""}`)
r = spawnSync(process.execPath, [path.join(root, "bench/startup.mjs")], { cwd: root, env, stdio: ["ignore", "inherit", "inherit"] })
if (r.status !== 0) process.exit(r.status ?? 1)
say("bench: the gateway")
r = spawnSync("npx", ["vitest", "run", "--project", "bench", "--reporter=dot"], { cwd: root, env, stdio: ["ignore", json ? "ignore" : "inherit", "inherit"] })
if (r.status !== 0) process.exit(r.status ?? 1)

const rows = fs.readFileSync(out, "utf8").trim().split("\n").filter(Boolean).map((l) => JSON.parse(l))
const machine = { cores: os.availableParallelism(), memory_gib: Math.round(os.totalmem() / 2 ** 30), node: process.version, date: new Date().toISOString() }
if (json) {
  console.log(JSON.stringify({ machine, rows }, null, 2))
} else {
  const fmt = (x) => (x === null || x === undefined ? "-" : x >= 100 ? x.toFixed(0) : x.toFixed(2))
  const ratio = (row) =>
    row.baseline === null ? "-"
      : row.compare === "added" ? `+${fmt(row.roster - row.baseline)} ${row.unit}`
      : row.compare === "share" ? `${((100 * row.roster) / row.baseline).toFixed(0)} %`
      : `${(row.roster / row.baseline).toFixed(2)}x`
  const table = [["metric", "roster", "baseline", "vs baseline", "goal", "", "spread"],
    ...rows.map((row) => [row.metric, `${fmt(row.roster)} ${row.unit}`, row.baseline === null ? "-" : `${fmt(row.baseline)} ${row.unit}`, ratio(row), row.goal, row.reported ? "" : row.pass ? "pass" : "MISS", row.spread ?? ""])]
  const widths = table[0].map((_, i) => Math.max(...table.map((t) => t[i].length)))
  console.log(`\n${machine.cores} cores, ${machine.memory_gib} GiB, Node ${machine.node}, ${machine.date}${smoke ? " (smoke pass: each bench once, smallest counts — not figures to judge by)" : quick ? " (quick pass)" : ""}`)
  for (const t of table) console.log(t.map((c, i) => c.padEnd(widths[i])).join("  ").trimEnd())
  const goals = rows.filter((row) => !row.reported)
  const missed = goals.filter((row) => !row.pass).length
  console.log(`\n${goals.length - missed} of ${goals.length} goals met`)
}
