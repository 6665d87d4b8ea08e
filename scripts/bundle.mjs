// The CLI as one bundled CommonJS script (dist/roster.cjs): `effect` and the @effect packages are
// imported through their barrels, and Node loading hundreds of their modules cost ~0.5 s and
// ~50 MB before roster did anything. Bundled and tree-shaken, `roster --version` measured
// 0.29 s / 104 MB against 0.78 s / 152 MB. The library build (dist/src, tsc) stays for embedders.
// CommonJS, not an ES module, so bin/roster.js can compile it with V8's code cache (Node 20 has no
// module compile cache): `roster --help` 0.38 → 0.28 s, 98 → 84 MB (docs/PERFORMANCE.md).
// Whitespace and syntax minified (names kept, so a stack trace still reads): 2.96 → 2.07 MB.
// dockerode and x509 are in the bundle but initialised only by the commands that need them (their
// import() becomes a call); dockerode's ssh transport and buildkit session (ssh2, gRPC: 90 of its
// 113 ms load, measured) are loaded from node_modules only if a DOCKER_HOST is ssh:// or a build asks
// for a session — roster's never does.
import { build } from "esbuild"
import { spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")

/**
 * Modules that export one function, replaced in the bundle by a function that requires the real
 * one on its first call. The build fails if one is no longer found, rather than quietly load it.
 */
const onFirstCall = {
  "docker-modem/lib/ssh.js": "./ssh",
  "dockerode/lib/session.js": "./session"
}
const lazyModules = {
  name: "lazy-modules",
  setup(b) {
    const seen = new Set()
    for (const [real, spec] of Object.entries(onFirstCall)) {
      const from = path.join("node_modules", path.dirname(real), path.sep)
      b.onResolve({ filter: new RegExp(`^\\./${path.basename(spec)}$`) }, (args) => {
        if (!args.importer.includes(from)) return undefined
        seen.add(real)
        return { path: real, namespace: "lazy" }
      })
    }
    b.onLoad({ filter: /.*/, namespace: "lazy" }, (args) => ({
      contents: `let real; module.exports = function () { real ??= require(${JSON.stringify(args.path)}); return real.apply(this, arguments) }`,
      loader: "js"
    }))
    b.onEnd(() => {
      const missing = Object.keys(onFirstCall).filter((m) => !seen.has(m))
      if (missing.length > 0) throw new Error(`bundle: ${missing.join(", ")} no longer imported as expected; check scripts/bundle.mjs's onFirstCall`)
    })
  }
}
/**
 * The chat services' SDKs stay in node_modules, required on first use (a listener starting, a
 * post): in the bundle they doubled its size (2.9 → 4.9 MB) and cost every command ~10 MB of
 * memory, measured, though only the daemon and doctor ever call them.
 */
const chatSdks = ["@slack/socket-mode", "@slack/web-api", "@slack/logger", "@discordjs/ws", "@discordjs/rest"]
/** pg's optional native binding, which roster never asks for: left to pg's own require, never bundled. */
const neverLoaded = ["pg-native"]
// The oldest Node roster runs on (package.json's engines, the oldest maintained line): the bundle is built
// for Node 24 (what roster is tested on and npm ci brings) and must still run there.
const NODE_TARGET = "node22.19"

const outfile = path.join(root, "dist/roster.cjs")
await build({
  entryPoints: [path.join(root, "src/bin.ts")],
  outfile,
  bundle: true,
  platform: "node",
  format: "cjs",
  target: NODE_TARGET,
  external: [...Object.keys(onFirstCall), ...chatSdks, ...neverLoaded],
  // An import() of one of them becomes a require at the call: the code cache has no loader for import().
  supported: { "dynamic-import": false },
  plugins: [lazyModules],
  // The sources are ES modules that find their package by import.meta.url.
  define: { "import.meta.url": "__rosterModuleUrl" },
  banner: { js: "const __rosterModuleUrl = require('node:url').pathToFileURL(__filename).href;" },
  logLevel: "warning",
  legalComments: "none",
  minifyWhitespace: true,
  minifySyntax: true
})

// roster/promise: roster for a program not on Effect 3 (plain TypeScript, or Effect 4), with roster's
// own Effect inside, so it needs none of the caller's. Beside dist/roster.cjs, so the files it finds
// by its own URL (box/, the engine) are where the CLI finds them.
await build({
  entryPoints: [path.join(root, "src/promise.ts")],
  outfile: path.join(root, "dist/promise.cjs"),
  bundle: true,
  platform: "node",
  format: "cjs",
  target: NODE_TARGET,
  external: [...Object.keys(onFirstCall), ...chatSdks, ...neverLoaded],
  plugins: [lazyModules],
  define: { "import.meta.url": "__rosterModuleUrl" },
  banner: { js: "const __rosterModuleUrl = require('node:url').pathToFileURL(__filename).href;" },
  logLevel: "warning",
  legalComments: "none",
  minifyWhitespace: true,
  minifySyntax: true
})

// bin/roster.js runs the bundle from V8's code cache, where a dynamic import() has no loader (it
// fails at the call, not at start): every import() must have been bundled into a call.
const left = [...fs.readFileSync(outfile, "utf8").matchAll(/\bimport\(\s*["'`]([^"'`]+)/g)].map((m) => m[1])
if (left.length > 0) throw new Error(`bundle: dynamic import() left in dist/roster.cjs (${left.join(", ")}): bundle them, or load them with require`)

// `roster --help` (and `roster`, `-h`) answered without loading the program, as `--version` is:
// the root page at its widest, written from this bundle, and the few lines that wrap it to a
// terminal (src/cli/helpLayout.ts, which the program's own page goes through: the same text at
// every width, tested). bin/roster.js uses it only beside the bundle it was written from.
const helpLayout = path.join(root, "dist/help.cjs")
await build({
  entryPoints: [path.join(root, "src/cli/helpLayout.ts")],
  outfile: helpLayout,
  bundle: true,
  platform: "node",
  format: "cjs",
  target: NODE_TARGET,
  logLevel: "warning",
  legalComments: "none",
  minifyWhitespace: true
})
const helpPage = path.join(root, "dist/help-root.json")
fs.rmSync(helpPage, { force: true })
const widest = spawnSync(process.execPath, [outfile, "--help"], { env: { ...process.env, COLUMNS: "1000" }, encoding: "utf8" })
if (widest.status !== 0 || !widest.stdout.includes("\nUSAGE\n")) {
  throw new Error(`bundle: roster --help from the new bundle failed (exit ${widest.status}): ${widest.stderr}`)
}
// Every command's page (`roster worker run --help`), from one run of the new bundle over all of
// them (src/cli/helpPages.ts): laid out at 1000 columns with its colours, as the program prints it.
const commandPages = path.join(root, "dist/help-pages.json")
fs.rmSync(commandPages, { force: true })
const dumped = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "roster-help-")), "pages.json")
const dump = spawnSync(process.execPath, [outfile], { env: { ...process.env, ROSTER_HELP_DUMP: dumped }, encoding: "utf8" })
const pages = dump.status === 0 && fs.existsSync(dumped) ? JSON.parse(fs.readFileSync(dumped, "utf8")) : undefined
if (!pages?.["worker run"]?.includes("USAGE")) {
  throw new Error(`bundle: the command help pages from the new bundle failed (exit ${dump.status}): ${dump.stderr}`)
}
fs.rmSync(path.dirname(dumped), { recursive: true, force: true })
// The bundle's last line names its build, and the pages name the same: bin/roster.js reads the
// bundle's last bytes, not all of it, to know a page is this bundle's (an install keeps both).
const id = createHash("sha256").update(fs.readFileSync(outfile)).update(widest.stdout).update(JSON.stringify(pages)).digest("hex").slice(0, 16)
fs.appendFileSync(outfile, `\n//# roster-build=${id}\n`)
fs.writeFileSync(helpPage, `${JSON.stringify({ build: id, text: widest.stdout })}\n`)
fs.writeFileSync(commandPages, `${JSON.stringify({ build: id, pages })}\n`)
