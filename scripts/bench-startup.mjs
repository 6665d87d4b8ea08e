#!/usr/bin/env node
// CLI start-up benchmark: the median wall time of `roster --version` and `roster runs list`,
// against baselines measured in the same run — bare Node, and Node importing Effect (the floor
// any Effect CLI pays). Prints figures and ratios; asserts nothing.
import { spawnSync } from "node:child_process"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const bin = path.join(root, "bin/roster.js")
const runs = Number(process.env.RUNS ?? 7)
const env = { ...process.env, ROSTER_HOME: path.join(os.tmpdir(), "roster-bench") }

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const time = (args) => {
  const samples = []
  for (let i = 0; i < runs; i++) {
    const t = process.hrtime.bigint()
    const r = spawnSync(process.execPath, args, { cwd: root, env, stdio: "ignore" })
    if (r.status !== 0 && !args.includes("runs")) throw new Error(`${args.join(" ")} exited ${r.status}`)
    samples.push(Number(process.hrtime.bigint() - t) / 1e6)
  }
  return median(samples)
}

const node = time(["-e", "0"])
const effect = time(["-e", "import('effect').then(() => 0)"])
const rows = [
  ["node -e 0", node],
  ["node + import effect", effect],
  ["roster --version", time([bin, "--version"])],
  ["roster runs list", time([bin, "runs", "list"])]
]
console.log(`median of ${runs} runs each (ms), ratio to the Effect floor:`)
for (const [name, ms] of rows) console.log(`  ${name.padEnd(22)} ${ms.toFixed(0).padStart(6)}  x${(ms / effect).toFixed(2)}`)
