import { FileSystem, Path } from "@effect/platform"
import { Clock, Effect, Option, Schema } from "effect"
import * as crypto from "node:crypto"
import { Paths, layout } from "../config/Paths.js"
import { isRunId } from "../config/names.js"
import { Files } from "../fs/Files.js"
import { copyTree, lchownTree } from "../fs/tree.js"
import { namesIn } from "../fs/namesIn.js"

/** A store snapshot or restore that failed, with the step that failed. */
export class StoreError extends Schema.TaggedError<StoreError>()("StoreError", { detail: Schema.String }) {
  override get message() {
    return `store snapshot failed: ${this.detail}`
  }
}

const Manifest = Schema.Record({ key: Schema.String, value: Schema.String })
export type Manifest = typeof Manifest.Type

const failing = (what: string) => (e: { readonly message: string }) => new StoreError({ detail: `${what}: ${e.message}` })

/**
 * path -> digest of every entry in the store. The box writes here, so a symlink is recorded
 * by its target text and never followed: a snapshot must not read host files through it.
 * Each file is its own step, so an interrupt lands between files, not after the whole walk.
 */
export const manifestOf = (root: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const files = yield* Files
    const path = yield* Path.Path
    const out: Record<string, string> = {}
    const walk = (dir: string): Effect.Effect<void, StoreError> =>
      Effect.gen(function*() {
        for (const entry of yield* files.list(dir).pipe(Effect.mapError(failing("reading the store")))) {
          const full = path.join(dir, entry.name)
          const rel = path.relative(root, full)
          if (entry.kind === "symlink") out[rel] = `link:${yield* fs.readLink(full).pipe(Effect.mapError(failing("reading a link")))}`
          else if (entry.kind === "directory") {
            out[`${rel}/`] = "dir"
            yield* walk(full)
          } else if (entry.kind === "file") {
            const bytes = yield* fs.readFile(full).pipe(Effect.mapError(failing("reading the store")))
            out[rel] = crypto.createHash("sha256").update(bytes).digest("hex")
          }
        }
      })
    yield* walk(root)
    return out as Manifest
  })

/** A copy of the store that keeps symlinks as links (never their targets), file by file. */
const copyStore = (from: string, to: string) => copyTree(from, to).pipe(Effect.mapError(failing("copying the store")))

export const changesBetween = (a: Manifest, b: Manifest) => {
  let n = 0
  for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) if (a[k] !== b[k]) n++
  return n
}

const SnapshotMeta = Schema.Struct({ id: Schema.String, time: Schema.String, changes: Schema.Number })
type SnapshotMeta = typeof SnapshotMeta.Type

/** One snapshot as `roster store list` shows it. */
export interface SnapshotInfo {
  readonly id: string
  /** The run it was taken after; null for one taken outside a run (the daemon's sweep, a restore). */
  readonly run_id: string | null
  /** What took it: a run's end, the daemon's sweep, or a restore (the store it replaced). */
  readonly taken_by: "run" | "sweep" | "restore"
  readonly time: string
  readonly changes: number
  readonly dir: string
}

const timeOfId = (id: string) => {
  const m = /^(\d{4})-(\d{2})-(\d{2})-(\d{2})-(\d{2})-(\d{2})/.exec(id)
  return m ? `${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}.000Z` : ""
}

/** A fresh id for a snapshot taken outside a run: sorts by time among run ids, never one that exists. */
export const snapshotIdAt = Effect.fn("store.snapshotId")(function*(worker: string, why: "sweep" | "restore") {
  const taken = new Set(yield* listSnapshots(worker))
  const stamp = `${new Date(yield* Clock.currentTimeMillis).toISOString().replace(/[-:T]/g, "-").slice(0, 19)}-${why}`
  let id = stamp
  for (let n = 2; taken.has(id); n++) id = `${stamp}-${n}`
  return id
})

/**
 * The worker's snapshots, oldest first, each with its time, run and change count (from its note;
 * a snapshot older than notes is compared with the one before it).
 */
export const snapshotInfos = Effect.fn("store.snapshotInfos")(function*(worker: string) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const root = layout(yield* Paths).snapshotsDir(worker)
  const readJson = <A, I>(schema: Schema.Schema<A, I>, file: string) =>
    fs.readFileString(file).pipe(Effect.flatMap(Schema.decode(Schema.parseJson(schema))), Effect.option)
  const out: Array<SnapshotInfo> = []
  let previous: Manifest = {}
  for (const id of yield* listSnapshots(worker)) {
    const dir = path.join(root, id)
    const manifest = Option.getOrElse(yield* readJson(Manifest, path.join(dir, "manifest.json")), (): Manifest => ({}))
    const meta = yield* readJson(SnapshotMeta, path.join(dir, "meta.json"))
    out.push({
      id,
      run_id: isRunId(id) ? id : null,
      taken_by: isRunId(id) ? "run" : /-restore(-\d+)?$/.test(id) ? "restore" : "sweep",
      time: Option.isSome(meta) ? meta.value.time : timeOfId(id),
      changes: Option.isSome(meta) ? meta.value.changes : changesBetween(previous, manifest),
      dir
    })
    previous = manifest
  }
  return out as ReadonlyArray<SnapshotInfo>
})

/**
 * Puts a snapshot back as the worker's store: copied beside it (links kept as links), then
 * swapped in by rename, so a failure halfway leaves the current store as it was.
 */
export const restoreSnapshot = Effect.fn("store.restore")(function*(worker: string, id: string, owner: { readonly uid: number; readonly gid: number } | undefined) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const files = layout(yield* Paths)
  const store = files.storeDir(worker)
  const from = path.join(files.snapshotsDir(worker), id, "store")
  const incoming = `${store}.restoring`
  const outgoing = `${store}.replaced`
  // What a cut restore left: one that cannot go makes the copy into it fail below, saying where.
  for (const leftover of [incoming, outgoing]) yield* fs.remove(leftover, { recursive: true }).pipe(Effect.ignore)
  // A snapshot of an empty store has no store folder: restoring it empties the store. One that cannot be looked
  // at is an error, never taken for empty (that would empty the store).
  if (yield* fs.exists(from).pipe(Effect.mapError(failing("reading the snapshot")))) yield* copyStore(from, incoming)
  else yield* fs.makeDirectory(incoming, { recursive: true }).pipe(Effect.mapError(failing("creating the store")))
  if (owner) yield* lchownTree(incoming, owner.uid, owner.gid).pipe(Effect.mapError(failing("handing the store to the box user")))
  if (yield* fs.exists(store).pipe(Effect.mapError(failing("looking at the current store")))) {
    yield* fs.rename(store, outgoing).pipe(Effect.mapError(failing("moving the current store aside")))
  }
  yield* fs.rename(incoming, store).pipe(Effect.mapError(failing("putting the snapshot in place")))
  // The restore is done; the store it replaced, left beside it, is said (and goes at the next restore).
  yield* fs.remove(outgoing, { recursive: true }).pipe(
    Effect.catchAll((e) => Effect.logWarning(`the store ${worker} had before the restore could not be removed (${e.message}): remove it with: rm -rf ${outgoing}`))
  )
})

export interface SnapshotOutcome {
  readonly dir: string
  readonly changes: number
}

/** The worker's durable store, created on first use. */
export const provisionStore = Effect.fn("store.provision")(function*(worker: string) {
  const dir = layout(yield* Paths).storeDir(worker)
  yield* (yield* FileSystem.FileSystem).makeDirectory(dir, { recursive: true }).pipe(Effect.mapError(failing("creating the store")))
  return dir
})

/** The snapshots of a worker's store, oldest first; a `.partial` left by a cut copy is never one. */
export const listSnapshots = Effect.fn("store.listSnapshots")(function*(worker: string) {
  const root = layout(yield* Paths).snapshotsDir(worker)
  const names = yield* namesIn(yield* FileSystem.FileSystem, root, `the snapshots of ${worker}'s store`)
  return names.filter((n) => !n.startsWith(".") && !n.endsWith(".partial")).sort()
})

/**
 * A rotating snapshot of the store after a run ("restore to just before the bad run"): taken
 * only when the store changed since the last one, the oldest pruned beyond `keep`. The copy
 * goes to `<id>.partial` and is renamed when whole; an interrupt or a failure removes the
 * partial copy, so a half-copied snapshot is never counted as one.
 */
export const snapshotStore = (worker: string, runId: string, keep: number) =>
  keep <= 0
    ? Effect.succeed(undefined)
    : Effect.flatMap(Paths, (p) => manifestOf(layout(p).storeDir(worker))).pipe(Effect.flatMap((current) => snapshotStoreAs(worker, runId, keep, current)))

/** {@link snapshotStore} of a store already measured (`current`, its manifest now): its caller walks it once. */
export const snapshotStoreAs = Effect.fn("store.snapshot")(function*(worker: string, runId: string, keep: number, current: Manifest) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const files = layout(yield* Paths)
  const store = files.storeDir(worker)
  const root = files.snapshotsDir(worker)
  if (keep <= 0) return undefined
  const existing = yield* listSnapshots(worker)
  const latest = existing.at(-1)
  const previous: Manifest = latest
    ? yield* fs.readFileString(path.join(root, latest, "manifest.json")).pipe(
      Effect.flatMap(Schema.decode(Schema.parseJson(Manifest))),
      // A last manifest that cannot be read counts every file as changed: a snapshot is taken, never one skipped.
      Effect.orElseSucceed((): Manifest => ({}))
    )
    : {}
  const changes = changesBetween(previous, current)
  if (changes === 0) return undefined
  const dir = path.join(root, runId)
  const partial = `${dir}.partial`
  yield* Effect.acquireUseRelease(
    // A partial a cut copy left: one that cannot go makes the copy into it fail, saying where.
    fs.remove(partial, { recursive: true }).pipe(Effect.ignore, Effect.as(partial)),
    (tmp) =>
      Effect.gen(function*() {
        yield* copyStore(store, path.join(tmp, "store"))
        yield* fs.writeFileString(path.join(tmp, "manifest.json"), JSON.stringify(current)).pipe(Effect.mapError(failing("writing the manifest")))
        const time = new Date(yield* Clock.currentTimeMillis).toISOString()
        yield* fs.writeFileString(path.join(tmp, "meta.json"), JSON.stringify({ id: runId, time, changes } satisfies SnapshotMeta)).pipe(
          Effect.mapError(failing("writing the snapshot's note"))
        )
        yield* fs.rename(tmp, dir).pipe(Effect.mapError(failing("completing the snapshot")))
      }),
    // The copy's own failure is what is returned; a partial left is never counted as a snapshot (its name), and goes next time.
    (tmp, exit) => (exit._tag === "Success" ? Effect.void : fs.remove(tmp, { recursive: true }).pipe(Effect.ignore))
  )
  for (const old of [...existing, runId].sort().slice(0, Math.max(0, existing.length + 1 - keep))) {
    yield* fs.remove(path.join(root, old), { recursive: true }).pipe(Effect.mapError(failing("pruning an old snapshot")))
  }
  return { dir, changes } satisfies SnapshotOutcome
})
