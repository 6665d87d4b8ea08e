import { FileSystem, Path } from "@effect/platform"
import { SystemError } from "@effect/platform/Error"
import { Effect } from "effect"
import { type Appender, Files } from "./Files.js"

/**
 * Lines appended to `<dir>/<UTC day>.jsonl` (the gateway's audit log, the spend ledger), the day's
 * file kept open between lines — one write a line, no open and close each (measured, the largest
 * per-line cost of both) — and closed when the day turns or the scope closes. The first line
 * makes the folder (0700); the files are `mode`. A line is on disk when its write returns.
 */
export const makeDayFiles = (dir: string, mode = 0o600) =>
  Effect.gen(function*() {
    const files = yield* Files
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const opening = yield* Effect.makeSemaphore(1)
    // The open day files by path, and the one lines go to now.
    const open = new Map<string, Appender>()
    let today: { readonly day: string; readonly appender: Appender } | undefined
    // Once closed, no file is opened again: a write after the scope's end (a caller that outlived
    // it) is refused, not given a handle no one would ever close.
    let closed = false
    yield* Effect.addFinalizer(() =>
      opening.withPermits(1)(Effect.suspend(() => {
        closed = true
        today = undefined
        const all = [...open.values()]
        open.clear()
        return Effect.forEach(all, (a) => a.close, { discard: true })
      }))
    )
    // Opened and filed in one step an interrupt cannot split: every handle is in `open`, for the finalizer to close.
    const appenderFor = (day: string) =>
      opening.withPermits(1)(Effect.uninterruptible(Effect.gen(function*() {
        const file = path.join(dir, `${day}.jsonl`)
        if (closed) {
          return yield* Effect.fail(new SystemError({ reason: "Unknown", module: "FileSystem", method: "open", pathOrDescriptor: file, description: "the file is closed (its scope ended)" }))
        }
        const again = open.get(file)
        if (again) return again
        // The first line of a deployment (or after someone removed the folder) makes it.
        yield* fs.makeDirectory(dir, { recursive: true, mode: 0o700 })
        const appender = yield* files.openAppend(file, mode)
        // An earlier day is done with.
        for (const [other, a] of open) {
          open.delete(other)
          yield* a.close
        }
        open.set(file, appender)
        today = { day, appender }
        return appender
      })))
    /** The day's file when it is open now: a caller that is not a fiber pushes its line through it. */
    const current = (day: string) => (today?.day === day ? today.appender : undefined)
    return {
      current,
      /** Appends `line` to `day`'s file; gives the offset it was written at (see Appender). */
      write: (day: string, line: string) => {
        const known = current(day)
        return known ? known.write(line) : Effect.flatMap(appenderFor(day), (a) => a.write(line))
      }
    }
  })

export type DayFiles = Effect.Effect.Success<ReturnType<typeof makeDayFiles>>
