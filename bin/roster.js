#!/usr/bin/env -S node --max-semi-space-size=1 --optimize-for-size
// A 1 MB young generation and V8's small-footprint mode: a box streaming hundreds of MB through
// roster then costs a few MB of headroom instead of ~50 (measured, 250 MB of output with a 50 MB
// line: 200 MB peak RSS with Node's defaults, 127-131 MB with these; a one-line run 150 -> 131 MB,
// same speed). The daemon inherits the flags (it is started with this process's execArgv).
import { readFileSync } from "node:fs"

// `roster --version` answers from package.json without loading the program (a script's health
// check should not pay ~0.3 s of module compile for one line).
if (process.argv.length === 3 && process.argv[2] === "--version") {
  process.stdout.write(`${JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).version}\n`)
} else {
  await import("../dist/roster.mjs")
}
