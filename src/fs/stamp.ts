import { Clock, Effect, type Option } from "effect"
import * as fsp from "node:fs/promises"

/**
 * Which version of a file is on disk, from one stat: roster writes by rename (a new inode), and any
 * other edit moves the time or the size. None when the file is not there. Lets a reader keep what
 * it decoded until the file changes, without reading it again to find out. The time is the
 * nanosecond one (node's bigint stat: @effect/platform's stat has milliseconds only) — two
 * same-sized writes in one millisecond, an edit right after roster's own write, must still differ.
 */
export const fileStamp = (file: string) =>
  Effect.tryPromise(() => fsp.stat(file, { bigint: true })).pipe(
    Effect.map((s) => `${s.ino}:${s.mtimeNs}:${s.ctimeNs}:${s.size}`),
    Effect.option
  )

/** Every stamp cache of this process, for {@link lookAgainNow}. */
const caches = new Set<Map<string, unknown>>()

/**
 * Every file behind a stamp cache looked at again on its next ask, not within its period: what a
 * person typed just before a command (an org.toml edit, `connection rm`) holds for that command
 * when the daemon runs it for the CLI (a handed-over `worker run`), as it would in a CLI of its own.
 */
export const lookAgainNow = Effect.sync(() => {
  for (const c of caches) c.clear()
  lookedAgain++
})

let lookedAgain = 0

/**
 * How many times {@link lookAgainNow} has run: a cache of what was decided from these files
 * (the gateway's per-connection grant) holds only while this has not moved.
 */
export const lookAgainCount = () => lookedAgain

/**
 * A file's stamp looked at no more than once per `ttlMs` (by the Clock): a reader on a hot path
 * (the gateway asks for org.toml and a credential on every request) pays one stat per file per
 * period, and an edit by another process is seen within it. A write of the reader's own is
 * `forget`-ten, so it is seen at once.
 */
export const makeStampCache = (ttlMs: number) => {
  const recent = new Map<string, { readonly stamp: Option.Option<string>; readonly at: number }>()
  caches.add(recent)
  return {
    stamp: (file: string) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const hit = recent.get(file)
        if (hit && now - hit.at < ttlMs) return hit.stamp
        const stamp = yield* fileStamp(file)
        if (recent.size > 1_000) recent.clear()
        recent.set(file, { stamp, at: now })
        return stamp
      }),
    forget: (file: string) => Effect.sync(() => void recent.delete(file))
  }
}
