import { FileSystem } from "@effect/platform"
import { Clock, Effect } from "effect"

const DAY_MS = 24 * 60 * 60 * 1000

/**
 * Runs `say` at most once a day per deployment, remembered in a marker file of its state dir (as
 * the reference does): a note on every run is one nobody reads. A marker that cannot be written
 * costs only a repeat.
 */
export const onceADay = <E, R>(marker: string, say: Effect.Effect<void, E, R>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const now = yield* Clock.currentTimeMillis
    // No marker, or one that cannot be read, is "not yet today": the note is said again, a repeat its only cost.
    const last = yield* fs.readFileString(marker).pipe(Effect.map((t) => Date.parse(t.trim())), Effect.orElseSucceed(() => Number.NaN))
    if (now - last < DAY_MS) return
    // A marker not written brings the note again next time: a repeat, nothing lost.
    yield* fs.writeFileString(marker, `${new Date(now).toISOString()}\n`).pipe(Effect.ignore)
    yield* say
  })
