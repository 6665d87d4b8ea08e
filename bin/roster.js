#!/usr/bin/env -S node --max-semi-space-size=1 --optimize-for-size
// A 1 MB young generation and V8's small-footprint mode: a box streaming hundreds of MB through
// roster then costs a few MB of headroom instead of ~50 (measured, 250 MB of output with a 50 MB
// line: 200 MB peak RSS with Node's defaults, 127-131 MB with these; a one-line run 150 -> 131 MB,
// same speed). The daemon inherits the flags (it is started with this process's execArgv).
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import { createRequire, Module } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as vm from "node:vm"

// A maintained Node, first: 22.19 or newer (src/contract/nodeSupport.ts gives the same floor and says why).
{
  const [major, minor] = process.versions.node.split(".").map(Number)
  if (major < 22 || (major === 22 && minor < 19)) {
    process.stderr.write(`roster needs Node 22.19 or newer (Node 24 LTS is what it is built and tested for); this is Node ${process.version}` +
      " — install Node 24 (nodejs.org, your distribution's nodesource packages, or nvm install 24) and run roster again\n")
    process.exit(1)
  }
}

const bundle = fileURLToPath(new URL("../dist/roster.cjs", import.meta.url))

/** Whether `dir` is this user's alone: theirs, a real folder, and nobody else may write in it. */
const ownedAlone = (dir) => {
  const d = fs.lstatSync(dir)
  return d.isDirectory() && d.uid === process.getuid?.() && (d.mode & 0o022) === 0
}

const hash = (...parts) => createHash("sha256").update(parts.join("\0")).digest("hex").slice(0, 12)

/**
 * Where V8's code cache for this bundle, this Node and these flags lives: the person's own cache
 * folder, made 0700 and used only while it is theirs alone (a code cache is code: a folder
 * another user can write would let them run theirs as this one). Nothing is created in a home
 * that is not this user's (`sudo` keeping HOME would leave a root-owned ~/.cache behind).
 * Undefined when there is none.
 */
const cacheFile = (stat) => {
  if (process.env.ROSTER_CODE_CACHE === "0") return undefined
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache")
  const dir = path.join(base, "roster")
  try {
    if (!fs.existsSync(dir)) {
      if (!ownedAlone(fs.existsSync(base) ? base : path.dirname(base))) return undefined
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
    }
    const d = fs.lstatSync(dir)
    if (!d.isDirectory() || d.uid !== process.getuid?.() || (d.mode & 0o077) !== 0) return undefined
  } catch {
    return undefined
  }
  // Per install and flags (a prefix, so an upgrade's cache replaces the last one), then per build
  // of the bundle: V8 checks a cache against its source's length only.
  const prefix = `cli-${hash(process.version, process.arch, bundle, ...process.execArgv)}-`
  return { dir, prefix, file: path.join(dir, `${prefix}${hash(stat.size, stat.mtimeMs, stat.ino)}.v8`) }
}

/** Kept only if it is a regular file of this user's (the folder check above is the real guard). */
const readCache = (file) => {
  try {
    const s = fs.lstatSync(file)
    return s.isFile() && s.uid === process.getuid?.() ? fs.readFileSync(file) : undefined
  } catch {
    return undefined
  }
}

/** Written at exit, after the command ran, so the functions it compiled lazily are in it too; older bundles' caches go. */
const writeCache = (cache, script) => {
  try {
    const tmp = `${cache.file}.${process.pid}.tmp`
    fs.writeFileSync(tmp, script.createCachedData(), { mode: 0o600 })
    fs.renameSync(tmp, cache.file)
    for (const f of fs.readdirSync(cache.dir)) {
      if (f.startsWith(cache.prefix) && path.join(cache.dir, f) !== cache.file && f.endsWith(".v8")) fs.rmSync(path.join(cache.dir, f), { force: true })
    }
  } catch {
    // A cache that could not be written costs the next start its compile time, nothing else.
  }
}

/**
 * Loads the bundled CLI as Node would load a CommonJS file, but compiled with V8's code cache:
 * Node compiles the 2 MB bundle from source on every start (~100 ms, measured on Node 20) and its own
 * compile cache does not serve a script loaded this way. A cache V8 rejects (another Node, other flags) is rewritten.
 */
const loadCli = () => {
  const source = fs.readFileSync(bundle, "utf8")
  const cache = cacheFile(fs.statSync(bundle))
  const cachedData = cache && readCache(cache.file)
  // No import() in the bundle (scripts/bundle.mjs checks): a cached script cannot serve one.
  const script = new vm.Script(Module.wrap(source), { filename: bundle, ...(cachedData ? { cachedData } : {}) })
  if (cache && (!cachedData || script.cachedDataRejected)) process.once("exit", () => writeCache(cache, script))
  const cli = new Module(bundle, undefined)
  cli.filename = bundle
  cli.paths = Module._nodeModulePaths(path.dirname(bundle))
  const require = createRequire(bundle)
  script.runInThisContext()(cli.exports, require, cli, bundle, path.dirname(bundle))
}

/** The build the bundle names on its last line (scripts/bundle.mjs), read from its last bytes only. */
const builtAs = () => {
  const fd = fs.openSync(bundle, "r")
  try {
    const tail = Buffer.alloc(64)
    const size = fs.fstatSync(fd).size
    const n = fs.readSync(fd, tail, 0, Math.min(64, size), Math.max(0, size - 64))
    return /\/\/# roster-build=([0-9a-f]+)\n$/.exec(tail.subarray(0, n).toString("latin1"))?.[1]
  } finally {
    fs.closeSync(fd)
  }
}

/** A page the build wrote beside this bundle, or undefined when there is none for it (a page from another build is never shown). */
const pageFile = (name) => {
  const page = JSON.parse(fs.readFileSync(new URL(`../dist/${name}`, import.meta.url), "utf8"))
  return typeof page.build === "string" && builtAs() === page.build ? page : undefined
}

/** A page laid out at its widest, wrapped to this terminal as the program wraps it (src/cli/helpLayout.ts, built beside the bundle). */
const wrapped = (text) => {
  const { helpWidth, wrapHelp } = createRequire(import.meta.url)("../dist/help.cjs")
  return wrapHelp(text, helpWidth())
}

/**
 * The root help page (`roster`, `roster --help`, `-h`) from what the build wrote beside this
 * bundle (scripts/bundle.mjs), wrapped to the terminal as the program wraps it; false when there
 * is none for this bundle.
 */
const printRootHelp = () => {
  try {
    const page = pageFile("help-root.json")
    if (typeof page?.text !== "string") return false
    process.stdout.write(wrapped(page.text))
    return true
  } catch {
    return false
  }
}

/**
 * A command's page (`roster worker run --help`: command words, then --help or -h, nothing else)
 * as the program prints it: laid out at 1000 columns with its colours, wrapped to the terminal,
 * the colours kept only on a terminal without NO_COLOR (src/cli/terminal.ts). False when the build
 * wrote none for these words.
 */
const printCommandHelp = (words) => {
  try {
    const text = pageFile("help-pages.json")?.pages?.[words.join(" ")]
    if (typeof text !== "string") return false
    const page = wrapped(text)
    const colour = process.stdout.isTTY === true && (process.env.NO_COLOR ?? "") === ""
    process.stdout.write(`${colour ? page : page.replace(/\x1b\[[0-9;]*m/g, "")}\n`)
    return true
  } catch {
    return false
  }
}

const args = process.argv.slice(2)
const last = args[args.length - 1]
const words = args.slice(0, -1)
// `roster --version` answers from package.json, and the help pages from the build, without
// loading the program (a script's health check, a person's look at a page: neither should pay
// ~0.5 s of module bodies for a page of text).
if (args.length === 1 && args[0] === "--version") {
  process.stdout.write(`${JSON.parse(fs.readFileSync(new URL("../package.json", import.meta.url), "utf8")).version}\n`)
} else if ((args.length === 0 || (args.length === 1 && (last === "--help" || last === "-h"))) && printRootHelp()) {
  // answered
} else if (words.length > 0 && (last === "--help" || last === "-h") && words.every((w) => /^[a-z][a-z-]*$/.test(w)) && printCommandHelp(words)) {
  // answered
} else if (args[0] === "worker" && args[1] === "run") {
  // Handed to the running daemon when it can take it (bin/handoff.js), else run here.
  const { handOff } = await import("./handoff.js")
  if (!(await handOff(args.slice(2), builtAs()))) loadCli()
} else {
  loadCli()
}
