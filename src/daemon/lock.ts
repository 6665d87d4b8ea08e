import { FileSystem } from "@effect/platform"
import { Clock, Effect, Schema } from "effect"
import { Paths, layout } from "../config/Paths.js"
import { currentOwner, ownerAlive } from "../contract/owner.js"

/** `state/daemon.lock`: which process is this deployment's daemon (pid and process start time). */
export const DaemonLockRecord = Schema.parseJson(Schema.Struct({
  pid: Schema.Number,
  start: Schema.String,
  started_at: Schema.String
}))
export type DaemonLockRecord = typeof DaemonLockRecord.Type

/** Another daemon of this deployment holds the lock: a second start changes nothing. */
export class DaemonRunning extends Schema.TaggedError<DaemonRunning>()("DaemonRunning", { pid: Schema.Number, lock: Schema.String }) {
  override get message() {
    return `another roster daemon (pid ${this.pid}) runs for this deployment (${this.lock}) — stop it first: roster server stop`
  }
}

/** The lock could not be written (a read-only or full state folder). */
export class DaemonLockError extends Schema.TaggedError<DaemonLockError>()("DaemonLockError", { lock: Schema.String, detail: Schema.String }) {
  override get message() {
    return `cannot take the daemon lock ${this.lock}: ${this.detail} — check that the state folder is writable`
  }
}

const readLock = (file: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readFileString(file)).pipe(
    Effect.flatMap(Schema.decode(DaemonLockRecord)),
    Effect.option
  )

/** The live daemon's lock record, if a live process holds it (a lock left by a dead one is no daemon). */
export const lockHolder = Effect.gen(function*() {
  const file = layout(yield* Paths).daemonLock
  const held = yield* readLock(file)
  if (held._tag === "None") return undefined
  return (yield* ownerAlive(held.value)) ? held.value : undefined
})

/** Creates `file` only if it does not exist: true when this call made it. */
const createExclusive = (file: string, text: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.writeFileString(file, text, { flag: "wx", mode: 0o600 })).pipe(
    Effect.as(true),
    Effect.catchIf((e) => e._tag === "SystemError" && e.reason === "AlreadyExists", () => Effect.succeed(false))
  )

/** Whether a file holds the lock of a live process (an unreadable or half-written one does not). */
const heldByLiveOwner = (file: string) =>
  readLock(file).pipe(Effect.flatMap((o) => (o._tag === "None" ? Effect.succeed(undefined) : Effect.map(ownerAlive(o.value), (alive) => (alive ? o.value : undefined)))))

/**
 * Removes a lock file if it can; one that stays is not lost track of. A dead owner's lock in the
 * way of the exclusive create is tried again, then said as the lock's error (take's last lines); a
 * takeover mark left holds no lock, and a later start finds its owner dead and removes it.
 */
const removeIfItCan = (file: string) => Effect.flatMap(FileSystem.FileSystem, (fs) => fs.remove(file)).pipe(Effect.ignore)

const removeIfDead = (file: string) =>
  Effect.gen(function*() {
    if (yield* heldByLiveOwner(file)) return
    yield* removeIfItCan(file)
  })

/**
 * Takes the lock: made exclusively, or taken over from a dead owner. Two starts that
 * both find a dead owner's lock go through a second exclusive file (`daemon.lock.takeover`), so
 * only one of them removes it and makes its own; the other then finds a live owner.
 */
const take = (file: string, text: string) =>
  Effect.gen(function*() {
    for (let attempt = 0; attempt < 5; attempt++) {
      if (yield* createExclusive(file, text)) return
      const holder = yield* heldByLiveOwner(file)
      if (holder) return yield* Effect.fail(new DaemonRunning({ pid: holder.pid, lock: file }))
      const takeover = `${file}.takeover`
      if (yield* createExclusive(takeover, text)) {
        const took = yield* Effect.gen(function*() {
          if (yield* heldByLiveOwner(file)) return false
          yield* removeIfItCan(file)
          return yield* createExclusive(file, text)
        }).pipe(Effect.ensuring(removeIfItCan(takeover)))
        if (took) return
      } else {
        // Another start is taking over (or died doing so): its file goes once its owner is dead.
        yield* removeIfDead(takeover)
      }
      yield* Effect.sleep(`${20 * (attempt + 1)} millis`)
    }
    const holder = yield* heldByLiveOwner(file)
    return yield* Effect.fail(holder ? new DaemonRunning({ pid: holder.pid, lock: file }) : new DaemonLockError({ lock: file, detail: "it kept changing hands" }))
  }).pipe(Effect.catchTag("SystemError", "BadArgument", (e) => Effect.fail(new DaemonLockError({ lock: file, detail: e.message }))))

/**
 * The deployment's daemon lock as a resource: taken before the daemon writes any state, touches
 * iptables or starts a supervisor, so a second daemon of the same deployment is refused having
 * changed nothing; released (only if still this process's) when the daemon's scope closes.
 */
export const holdDaemonLock = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const paths = yield* Paths
  const file = layout(paths).daemonLock
  yield* fs.makeDirectory(paths.state, { recursive: true }).pipe(Effect.mapError((e) => new DaemonLockError({ lock: file, detail: e.message })))
  const me = yield* currentOwner
  const record: DaemonLockRecord = { pid: me.pid, start: me.start, started_at: new Date(yield* Clock.currentTimeMillis).toISOString() }
  const text = `${JSON.stringify(record)}\n`
  return yield* Effect.acquireRelease(take(file, text).pipe(Effect.as(record)), () =>
    readLock(file).pipe(
      Effect.flatMap((o) => (o._tag === "Some" && o.value.pid === me.pid && o.value.start === me.start ? fs.remove(file) : Effect.void)),
      // A lock left behind names this process, dead once it exits: the next start takes it over.
      Effect.ignore
    ))
})
