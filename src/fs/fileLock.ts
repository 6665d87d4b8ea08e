import { Clock, Effect, Schema } from "effect"
import * as fsp from "node:fs/promises"
import * as path from "node:path"

/** A lock file another live process holds past the wait. */
export class FileLockBusy extends Schema.TaggedError<FileLockBusy>()("FileLockBusy", { file: Schema.String, pid: Schema.Number }) {
  override get message() {
    return `${this.file} is held by process ${this.pid} — if that process is stuck, stop it (or remove the lock file once it is gone)`
  }
}

/** The lock file could not be made at all (its folder missing or not writable). */
export class FileLockError extends Schema.TaggedError<FileLockError>()("FileLockError", { file: Schema.String, detail: Schema.String }) {
  override get message() {
    return `the lock ${this.file} cannot be made: ${this.detail} — check that its folder exists and is writable`
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** Made, or the pid that holds it; a lock whose holder is gone (killed mid-change) is taken over. */
const tryTake = async (file: string): Promise<number | undefined> => {
  try {
    const handle = await fsp.open(file, "wx", 0o600)
    await handle.writeFile(`${process.pid}\n`).finally(() => handle.close())
    return undefined
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
  }
  const pid = Number((await fsp.readFile(file, "utf8").catch(() => "")).trim())
  // Being written this instant (empty), or a holder that is alive: wait. A dead holder's lock goes.
  if (!Number.isInteger(pid) || pid <= 0 || alive(pid)) return Number.isInteger(pid) && pid > 0 ? pid : -1
  await fsp.unlink(file).catch(() => undefined)
  return tryTake(file)
}

/**
 * Runs `effect` holding `file` as a lock between processes of this machine (an O_EXCL file
 * holding the pid), waiting up to `waitMs` for another holder. The lock is released by the
 * scope however the effect ends; a holder killed with -9 leaves a file the next taker removes.
 */
export const withFileLock = <E2>(file: string, onBusy: (e: FileLockBusy | FileLockError) => E2, waitMs = 10_000) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | E2, R> =>
  Effect.acquireUseRelease(
    Effect.gen(function*() {
      yield* Effect.tryPromise({
        try: () => fsp.mkdir(path.dirname(file), { recursive: true, mode: 0o700 }),
        catch: (e) => new FileLockError({ file, detail: e instanceof Error ? e.message : String(e) })
      })
      const deadline = (yield* Clock.currentTimeMillis) + waitMs
      for (;;) {
        const holder = yield* Effect.tryPromise({
          try: () => tryTake(file),
          catch: (e) => new FileLockError({ file, detail: e instanceof Error ? e.message : String(e) })
        })
        if (holder === undefined) return
        if ((yield* Clock.currentTimeMillis) > deadline) return yield* new FileLockBusy({ file, pid: holder })
        yield* Effect.sleep("5 millis")
      }
    }).pipe(Effect.mapError(onBusy)),
    () => effect,
    () => Effect.promise(() => fsp.unlink(file).catch(() => undefined))
  )
