import { FileSystem } from "@effect/platform"
import { Clock, Effect, Option, Ref } from "effect"
import * as tls from "node:tls"
import { systemRoots } from "../../contract/caFiles.js"
import { fileStamp } from "../../fs/stamp.js"

/** How long a built context is trusted before the extra roots file is looked at again. */
const RECHECK_MS = 1000

interface Built {
  readonly extraFile: string | undefined
  readonly stamp: string
  readonly checkedAt: number
  readonly context: tls.SecureContext
}

/**
 * The roots an upstream's certificate is checked against — the system's plus `[gateway]
 * upstream_ca_file` — as one TLS context, built once and again only when the file changes
 * (looked at no more than once a second). Handing `tls.connect` the roots as text made it parse
 * some 140 certificates per upstream connection: measured, 28 ms of each.
 */
export const makeUpstreamTrust = Effect.gen(function*() {
  const built = yield* Ref.make<Built | undefined>(undefined)
  // One build at a time: sixteen connections opening at once must not each parse the roots.
  const lock = yield* Effect.makeSemaphore(1)
  const stampOf = (file: string | undefined) =>
    file === undefined ? Effect.succeed("none") : fileStamp(file).pipe(Effect.map(Option.getOrElse(() => "missing")))
  const build = (file: string | undefined) =>
    Effect.gen(function*() {
      const roots = yield* systemRoots
      const extra = file === undefined
        ? Option.none<string>()
        : yield* Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readFileString(file)).pipe(Effect.option)
      return tls.createSecureContext({ ca: Option.isSome(extra) ? [roots, extra.value] : [roots] })
    })
  const fresh = (extraFile: string | undefined, now: number) =>
    Ref.get(built).pipe(Effect.map((last) => (last && last.extraFile === extraFile && now - last.checkedAt < RECHECK_MS ? last.context : undefined)))
  const refresh = (extraFile: string | undefined, now: number) =>
    Effect.gen(function*() {
      const again = yield* fresh(extraFile, now)
      if (again) return again
      const last = yield* Ref.get(built)
      const stamp = yield* stampOf(extraFile)
      if (last && last.extraFile === extraFile && last.stamp === stamp) {
        yield* Ref.set(built, { ...last, checkedAt: now })
        return last.context
      }
      const context = yield* build(extraFile)
      yield* Ref.set(built, { extraFile, stamp, checkedAt: now, context })
      return context
    })
  return (extraFile: string | undefined) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      return (yield* fresh(extraFile, now)) ?? (yield* lock.withPermits(1)(refresh(extraFile, now)))
    })
})

export type UpstreamTrust = Effect.Effect.Success<typeof makeUpstreamTrust>
