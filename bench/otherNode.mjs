// Another Node for the start-up rows: the official build of `version` from the npm registry (the
// node-linux-<arch> package, as tools/node gets Node 24), kept in the temp folder between runs; and a
// copy of bin/roster.js without its Node floor, so the CLI's start can be measured on Node 20 — the
// Node roster refuses — beside the Node it runs on.
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

/** The path of the official Node `version`'s binary, fetched once. */
export const officialNode = (version) => {
  const dir = path.join(os.tmpdir(), `roster-bench-node-${version}`)
  const node = path.join(dir, "package", "bin", "node")
  if (fs.existsSync(node)) return node
  fs.mkdirSync(dir, { recursive: true })
  const pkg = `node-linux-${process.arch}@${version}`
  const packed = spawnSync("npm", ["pack", pkg, "--silent"], { cwd: dir, encoding: "utf8" })
  if (packed.status !== 0) throw new Error(`npm pack ${pkg} failed (is the npm registry reachable?): ${packed.stderr}`)
  const unpacked = spawnSync("tar", ["-xzf", path.join(dir, packed.stdout.trim().split("\n").at(-1)), "-C", dir, "package/bin/node"])
  if (unpacked.status !== 0) throw new Error(`could not unpack ${pkg} in ${dir}`)
  return node
}

/** bin/roster.js without its floor, beside links to its siblings in bin/, the same dist/ and package.json: what the CLI costs to start on an older Node. */
export const unflooredBin = (root) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "roster-bench-bin-"))
  fs.mkdirSync(path.join(dir, "bin"))
  for (const f of ["dist", "package.json"]) fs.symlinkSync(path.join(root, f), path.join(dir, f))
  // bin/roster.js imports its siblings (handoff.js) lazily: they come along, so the copy runs every path the original does.
  for (const f of fs.readdirSync(path.join(root, "bin"))) {
    if (f !== "roster.js") fs.symlinkSync(path.join(root, "bin", f), path.join(dir, "bin", f))
  }
  const source = fs.readFileSync(path.join(root, "bin", "roster.js"), "utf8")
  const floor = /\/\/ A maintained Node, first[^\n]*\n\{[\s\S]*?\n\}\n/
  if (!floor.test(source)) throw new Error("bin/roster.js's Node floor check moved: update bench/otherNode.mjs")
  fs.writeFileSync(path.join(dir, "bin", "roster.js"), source.replace(floor, ""))
  return path.join(dir, "bin", "roster.js")
}

/** Removes a copy unflooredBin made. */
export const dropUnfloored = (bin) => fs.rmSync(path.dirname(path.dirname(bin)), { recursive: true, force: true })

/** The flags bin/roster.js's first line gives Node: a measured start passes the same. */
export const binFlags = (root) => {
  const first = fs.readFileSync(path.join(root, "bin", "roster.js"), "utf8").split("\n")[0]
  return first.split(/\s+/).filter((w) => w.startsWith("--"))
}

/** A big CA bundle, as company machines set NODE_EXTRA_CA_CERTS to: the system's own. */
export const CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
