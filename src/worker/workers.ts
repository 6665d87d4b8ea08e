import { FileSystem, Path } from "@effect/platform"
import { Effect, Either, Option, Schema } from "effect"
import { ConfigError, readToml } from "../config/decode.js"
import { validateWorkerName } from "../config/names.js"
import { Paths, layout } from "../config/Paths.js"
import { WorkerSchema, type WorkerSettings } from "../config/schema.js"
import { writeAtomic } from "../fs/atomic.js"
import { makeStampCache } from "../fs/stamp.js"
import { namesIn } from "../fs/namesIn.js"

/** A worker's identity.md that no run may start from, with why and the fix. */
export class BadIdentity extends Schema.TaggedError<BadIdentity>()("BadIdentity", {
  worker: Schema.String,
  file: Schema.String,
  detail: Schema.String
}) {
  override get message() {
    return `${this.worker}'s identity (${this.file}) cannot start a run: ${this.detail} — fix it: roster worker edit ${this.worker}`
  }
}

/** A worker that has no identity.md in this deployment, with how to add it. */
export class UnknownWorker extends Schema.TaggedError<UnknownWorker>()("UnknownWorker", {
  worker: Schema.String,
  file: Schema.String
}) {
  override get message() {
    return `there is no worker "${this.worker}" (no ${this.file}) — add one: roster worker add ${this.worker}`
  }
}

/** `addWorker` of a worker that is already there. */
export class WorkerExists extends Schema.TaggedError<WorkerExists>()("WorkerExists", {
  worker: Schema.String
}) {
  override get message() {
    return `worker "${this.worker}" already exists — see it with: roster worker show ${this.worker}`
  }
}

export const defaultIdentity = (worker: string) =>
  `# ${worker}\n\nYou are ${worker}, a careful software worker. Do the task you are given, say plainly what you did ` +
  `and what you could not do, and leave your results in your workspace or store.\n`

/** The worker's identity.md; its absence means the worker does not exist. */
export const readIdentity = Effect.fn("workers.readIdentity")(function*(worker: string) {
  yield* validateWorkerName(worker)
  const fs = yield* FileSystem.FileSystem
  const file = layout(yield* Paths).identityMd(worker)
  return yield* fs.readFileString(file).pipe(Effect.mapError(() => new UnknownWorker({ worker, file })))
})

// Decoded once: a decoder is built from the schema on each call of decodeSync (measured on the gateway's metered path).
const decodeSettings = Schema.decodeSync(WorkerSchema)
const noSettings = Effect.sync(() => decodeSettings({}))

export const readWorkerSettings = Effect.fn("workers.readSettings")(function*(worker: string) {
  const file = layout(yield* Paths).workerToml(worker)
  return yield* readToml(WorkerSchema, file, noSettings)
})

/**
 * `readWorkerSettings` for a reader on a hot path (the gateway, on every model call): a worker's
 * file is looked at twice a second at most (one stat) and read and decoded again only when it
 * changed — an edit is seen within half a second, at once after `lookAgainNow`.
 */
export const makeWorkerSettingsCache = () => {
  const stamps = makeStampCache(500)
  const decoded = new Map<string, { readonly stamp: string; readonly result: Either.Either<WorkerSettings, ConfigError> }>()
  return Effect.fnUntraced(function*(worker: string) {
    const file = layout(yield* Paths).workerToml(worker)
    const stamp = Option.getOrElse(yield* stamps.stamp(file), () => "absent")
    const known = decoded.get(worker)
    if (known && known.stamp === stamp) return yield* known.result
    const read = yield* Effect.either(readWorkerSettings(worker))
    // A worker.toml that stops decoding mid-run keeps the limits it last had (said once, for this edit): an
    // edit half-saved must not lift a budget. Only with none known before does the error stand (the caller
    // then goes by org.toml's).
    const lastGood = known && Either.isRight(known.result) ? known.result : undefined
    const result = Either.isLeft(read) && lastGood !== undefined ? lastGood : read
    if (Either.isLeft(read)) {
      yield* Effect.logWarning(`${file} does not decode (${read.left.message}): ${lastGood ? "its last good settings stay in force until it does" : "org.toml's limits apply until it does"}`)
    }
    if (decoded.size > 1_000) decoded.clear()
    decoded.set(worker, { stamp, result })
    return yield* result
  })
}

export type { WorkerSettings }
export { ConfigError }

export const listWorkers = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const dir = layout(yield* Paths).workersDir
  const names = yield* namesIn(fs, dir, "the workers")
  const out: Array<string> = []
  for (const name of [...names].sort()) {
    // A folder that cannot be looked in is not listed as a worker (a worker is a folder with its identity.md).
    if (yield* fs.exists(path.join(dir, name, "identity.md")).pipe(Effect.orElseSucceed(() => false))) out.push(name)
  }
  return out
})

/** Adds a worker: workers/<name>/identity.md (the given identity, or a short starter) and a worker.toml. Fails if it exists. */
export const addWorker = Effect.fn("workers.add")(function*(worker: string, identity?: string) {
  yield* validateWorkerName(worker)
  const fs = yield* FileSystem.FileSystem
  const files = layout(yield* Paths)
  if (yield* fs.exists(files.identityMd(worker))) return yield* Effect.fail(new WorkerExists({ worker }))
  yield* writeAtomic(files.identityMd(worker), identity ?? defaultIdentity(worker))
  yield* writeAtomic(
    files.workerToml(worker),
    `# ${worker}'s settings (all optional)\n` +
      `# model = "anthropic/claude-sonnet-4-5"   # provider/model id for pi\n` +
      `# thinking = "medium"                       # off|minimal|low|medium|high|xhigh|max\n` +
      `[store]\nsnapshots = 5                             # rotating snapshots of the store kept after runs\n`
  )
  return files.workerDir(worker)
})
