import { FileSystem, Path } from "@effect/platform"
import * as crypto from "node:crypto"
import { Effect, Option, Schema } from "effect"
import { packageRoot } from "../packageRoot.js"

export const boxDir = Effect.flatMap(packageRoot, (root) => Effect.map(Path.Path, (path) => path.join(root, "box")))

const tsFiles = (dir: string, under: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readDirectory(dir)).pipe(
    Effect.map((names) => names.filter((f) => f.endsWith(".ts")).sort().map((f) => `${under}/${f}`))
  )

/** What goes into /opt/roster/engine, relative to box/: the pinned engine and every extension. */
export const engineFiles = (dir?: string) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const box = dir ?? (yield* boxDir)
    return [
      "engine/package.json",
      "engine/package-lock.json",
      "engine/run-pi",
      "engine/statx-shim.c",
      ...(yield* tsFiles(path.join(box, "extensions"), "extensions")),
      // What the extensions share (not loaded as extensions: run-pi takes extensions/*.ts only).
      ...(yield* tsFiles(path.join(box, "extensions", "lib"), "extensions/lib"))
    ]
  })

/** A digest of everything baked into /opt/roster/engine: an image carrying it is up to date. */
export const engineHash = (dir?: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const box = dir ?? (yield* boxDir)
    const h = crypto.createHash("sha256")
    for (const f of yield* engineFiles(box)) h.update(f).update("\0").update(yield* fs.readFile(path.join(box, f))).update("\0")
    return h.digest("hex").slice(0, 16)
  })

/** What roster reads of an npm lockfile: each package's version. */
const PackageLock = Schema.parseJson(Schema.Struct({
  packages: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Struct({ version: Schema.optional(Schema.String) }) }))
}))

/** The pi version the lockfile pins (recorded as an image label). */
export const pinnedPiVersion = (dir?: string) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const box = dir ?? (yield* boxDir)
    const text = yield* Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readFileString(path.join(box, "engine/package-lock.json")))
    const lock = Schema.decodeUnknownOption(PackageLock)(text)
    return Option.getOrUndefined(lock)?.packages?.["node_modules/@earendil-works/pi-coding-agent"]?.version ?? "unknown"
  })

const EngineManifest = Schema.parseJson(Schema.Struct({ engines: Schema.Struct({ node: Schema.String.pipe(Schema.pattern(/^\d+\.\d+\.\d+$/)) }) }))

/**
 * The box's Node, exact (`engines.node` of box/engine/package.json, in the engine hash: a new Node is a
 * new image): pi needs >= 22.19; 24 is the maintained LTS roster runs on too.
 */
export const pinnedNodeVersion = (dir?: string) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const box = dir ?? (yield* boxDir)
    const text = yield* Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readFileString(path.join(box, "engine/package.json")))
    return yield* Schema.decodeUnknown(EngineManifest)(text).pipe(Effect.map((m) => m.engines.node))
  })

/** Node for the offline image: the npm package that carries the official binary, for this machine's CPU. */
export const nodePackage = (version: string) => `node-linux-${process.arch === "arm64" ? "arm64" : "x64"}@${version}`
/** Where the image keeps the statx shim (box/engine/statx-shim.c), relative to its root; run-pi preloads it when present. */
export const STATX_SHIM = "opt/roster/lib/statx-shim.so"

export const BOX_USER_LINE = "roster:x:65532:65532:roster box:/pihome:/bin/bash"
