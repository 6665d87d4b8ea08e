import { Effect, Schema } from "effect"
import * as crypto from "node:crypto"
import * as fsp from "node:fs/promises"
import * as nodePath from "node:path"
import { Paths, layout } from "../config/Paths.js"

export class StoreError extends Schema.TaggedError<StoreError>()("StoreError", { detail: Schema.String }) {
  override get message() {
    return `store snapshot failed: ${this.detail}`
  }
}

type Manifest = Record<string, string>

const io = <A>(what: string, f: () => Promise<A>) =>
  Effect.tryPromise({ try: f, catch: (e) => new StoreError({ detail: `${what}: ${e instanceof Error ? e.message : String(e)}` }) })

/**
 * path -> digest of every entry in the store. The box writes here, so a symlink is recorded
 * by its target text and never followed: a snapshot must not read host files through it.
 */
const manifestOf = (root: string) =>
  io("reading the store", async () => {
    const out: Manifest = {}
    const walk = async (dir: string): Promise<void> => {
      for (const entry of await fsp.readdir(dir, { withFileTypes: true })) {
        const full = nodePath.join(dir, entry.name)
        const rel = nodePath.relative(root, full)
        if (entry.isSymbolicLink()) out[rel] = `link:${await fsp.readlink(full)}`
        else if (entry.isDirectory()) {
          out[`${rel}/`] = "dir"
          await walk(full)
        } else if (entry.isFile()) {
          out[rel] = crypto.createHash("sha256").update(await fsp.readFile(full)).digest("hex")
        }
      }
    }
    await walk(root)
    return out
  })

const changesBetween = (a: Manifest, b: Manifest) => {
  let n = 0
  for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) if (a[k] !== b[k]) n++
  return n
}

export interface SnapshotOutcome {
  readonly dir: string
  readonly changes: number
}

/** The worker's durable store, created on first use. */
export const provisionStore = Effect.fn("store.provision")(function*(worker: string) {
  const dir = layout(yield* Paths).storeDir(worker)
  yield* io("creating the store", () => fsp.mkdir(dir, { recursive: true }))
  return dir
})

/**
 * A rotating snapshot of the store after a run ("restore to just before the bad run"): taken
 * only when the store changed since the last one, the oldest pruned beyond `keep`.
 */
export const snapshotStore = Effect.fn("store.snapshot")(function*(worker: string, runId: string, keep: number) {
  const files = layout(yield* Paths)
  const store = files.storeDir(worker)
  const root = files.snapshotsDir(worker)
  if (keep <= 0) return undefined
  const current = yield* manifestOf(store)
  yield* io("creating the snapshot folder", () => fsp.mkdir(root, { recursive: true }))
  const existing = (yield* io("listing snapshots", () => fsp.readdir(root))).filter((n) => !n.startsWith(".")).sort()
  const latest = existing.at(-1)
  const previous: Manifest = latest
    ? yield* io("reading the last snapshot", async () =>
      JSON.parse(await fsp.readFile(nodePath.join(root, latest, "manifest.json"), "utf8")) as Manifest).pipe(
        Effect.orElseSucceed((): Manifest => ({}))
      )
    : {}
  const changes = changesBetween(previous, current)
  if (changes === 0) return undefined
  const dir = nodePath.join(root, runId)
  const tmp = `${dir}.partial`
  yield* io("copying the store", async () => {
    await fsp.rm(tmp, { recursive: true, force: true })
    await fsp.cp(store, nodePath.join(tmp, "store"), { recursive: true, verbatimSymlinks: true, preserveTimestamps: true })
    await fsp.writeFile(nodePath.join(tmp, "manifest.json"), JSON.stringify(current))
    await fsp.rename(tmp, dir)
  })
  for (const old of [...existing, runId].sort().slice(0, Math.max(0, existing.length + 1 - keep))) {
    yield* io("pruning an old snapshot", () => fsp.rm(nodePath.join(root, old), { recursive: true, force: true }))
  }
  return { dir, changes } satisfies SnapshotOutcome
})
