import { FileSystem, Path } from "@effect/platform"
import { Clock, Console, Context, Effect, Layer, Ref, Schema } from "effect"
import { Paths, layout } from "../config/Paths.js"
import { Docker, type DockerError } from "../docker/Docker.js"
import { readJsonOptional, writeJson } from "../fs/atomic.js"

export class ImageMissing extends Schema.TaggedError<ImageMissing>()("ImageMissing", {
  image: Schema.String,
  detail: Schema.String
}) {
  override get message() {
    return this.image.includes("/")
      ? `could not pull the box image ${this.image} and there is no local copy (${this.detail}) — check registry access, ` +
        `or build one locally (roster box build) and point [engine] image in org.toml at it`
      : `the box image "${this.image}" is not present — build it: roster box build`
  }
}

/** `state/image-pulls.json`: when each registry image was last pulled (ms since the epoch). */
const PullTimes = Schema.Record({ key: Schema.String, value: Schema.Number })

/** How long a CLI run trusts the last pull; the daemon pulls on every start regardless. */
export const PULL_TTL_MS = 24 * 60 * 60 * 1000

/** A bare local tag names an image built here; anything with a registry path can be pulled. */
export const isRegistryRef = (image: string) => image.includes("/")

export class ImageStore extends Context.Tag("roster/ImageStore")<ImageStore, {
  /** Present and reasonably current; `force` pulls a registry image even within the TTL. */
  readonly ensure: (image: string, options?: { readonly force?: boolean }) => Effect.Effect<void, ImageMissing | DockerError>
}>() {
  static readonly layer = Layer.effect(
    ImageStore,
    Effect.gen(function*() {
      const docker = yield* Docker
      const file = layout(yield* Paths).imagePulls
      const ctx = yield* Effect.context<FileSystem.FileSystem | Path.Path>()
      // One permit for all: concurrent runs wait for a single download instead of racing their own.
      const lock = yield* Effect.makeSemaphore(1)
      const ensured = yield* Ref.make<ReadonlySet<string>>(new Set())

      const pulls = readJsonOptional(file).pipe(
        Effect.map((raw) => Schema.decodeUnknownOption(PullTimes)(raw).pipe((o) => (o._tag === "Some" ? o.value : {})))
      )
      const pulledRecently = (image: string) =>
        Effect.gen(function*() {
          const at = (yield* pulls)[image]
          const now = yield* Clock.currentTimeMillis
          return typeof at === "number" && now - at >= 0 && now - at < PULL_TTL_MS
        })
      const recordPull = (image: string) =>
        Effect.gen(function*() {
          const map = yield* pulls
          yield* writeJson(file, { ...map, [image]: yield* Clock.currentTimeMillis })
        }).pipe(Effect.ignore)

      const pull = (image: string, present: boolean) =>
        Effect.gen(function*() {
          if (!present) yield* Console.error(`downloading the box image ${image} …`)
          let last = ""
          const result = yield* docker.imagePull(image, (p) => {
            const line = `${p.id ? `${p.id}: ` : ""}${p.status}${p.progress ? ` ${p.progress}` : ""}`
            if (!present && line !== last && process.stderr.isTTY) process.stderr.write(`\r\x1b[K${line}`)
            last = p.status
          }).pipe(Effect.either)
          if (!present && process.stderr.isTTY) process.stderr.write("\r\x1b[K")
          if (result._tag === "Right") {
            if (last.includes("Downloaded newer image")) yield* Console.error(`box image updated: ${image}`)
            yield* recordPull(image)
          } else if (!present) {
            return yield* Effect.fail(new ImageMissing({ image, detail: result.left.detail }))
          } else {
            yield* Console.error(`note: could not pull ${image} (${result.left.detail}) — running the local copy`)
          }
        })

      const ensure = (image: string, options?: { readonly force?: boolean }) =>
        Effect.gen(function*() {
          if (!options?.force && (yield* Ref.get(ensured)).has(image)) return
          // An engine that does not answer is that, not a missing image (imageInspect answers undefined for a 404).
          const inspected = yield* docker.imageInspect(image)
          const present = inspected !== undefined
          if (!isRegistryRef(image)) {
            if (!present) return yield* Effect.fail(new ImageMissing({ image, detail: "not built" }))
          } else if (options?.force || !present || !(yield* pulledRecently(image))) {
            yield* pull(image, present)
          }
          yield* Ref.update(ensured, (s) => new Set([...s, image]))
        }).pipe(lock.withPermits(1), Effect.provide(ctx))

      return { ensure }
    })
  )
}
