import { FileSystem, Path } from "@effect/platform"
import { Clock, Context, Effect, Layer, Ref, Schema } from "effect"
import { captureHostFiles, Paths, layout } from "../../config/Paths.js"
import { Docker, type DockerError } from "../../docker/Docker.js"
import { readJsonOptional, writeJson } from "../../fs/atomic.js"
import { notice, progress, progressDone, Reporter, reporterCallback } from "../../report/Reporter.js"

/** The box image is not there and cannot be pulled, with how to build it. */
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

/** What ensuring an image reads: the engine, the deployment and the reporter its layer was built with. */
export type ImageStoreEnv = Docker | Reporter | Paths | FileSystem.FileSystem | Path.Path

const pullTimes = (file: string) =>
  readJsonOptional(file).pipe(
    Effect.map((raw) => Schema.decodeUnknownOption(PullTimes)(raw).pipe((o) => (o._tag === "Some" ? o.value : {})))
  )

const pulledRecently = (file: string, image: string) =>
  Effect.gen(function*() {
    const at = (yield* pullTimes(file))[image]
    const now = yield* Clock.currentTimeMillis
    return typeof at === "number" && now - at >= 0 && now - at < PULL_TTL_MS
  })

const recordPull = (file: string, image: string) =>
  Effect.gen(function*() {
    const map = yield* pullTimes(file)
    yield* writeJson(file, { ...map, [image]: yield* Clock.currentTimeMillis })
  }).pipe(Effect.ignore)

/** Pulls a registry image; its layers' progress goes to the Reporter (a terminal shows it, a log does not). */
const pull = (file: string, image: string, present: boolean) =>
  Effect.gen(function*() {
    const docker = yield* Docker
    const reporter = yield* Reporter
    const say = yield* reporterCallback
    const task = `pull ${image}`
    if (!present) yield* reporter.report(notice(`downloading the box image ${image} …`))
    let last = ""
    const result = yield* docker.imagePull(image, (p) => {
      const line = `${p.id ? `${p.id}: ` : ""}${p.status}${p.progress ? ` ${p.progress}` : ""}`
      if (!present && line !== last) say(progress(task, line))
      last = p.status
    }).pipe(Effect.either)
    if (!present) yield* reporter.report(progressDone(task))
    if (result._tag === "Right") {
      if (last.includes("Downloaded newer image")) yield* reporter.report(notice(`box image updated: ${image}`))
      yield* recordPull(file, image)
    } else if (!present) {
      return yield* Effect.fail(new ImageMissing({ image, detail: result.left.detail }))
    } else {
      yield* reporter.report(notice(`could not pull ${image} (${result.left.detail}) — running the local copy`, "warning"))
    }
  }).pipe(Effect.scoped)

/** The box image: present, and pulled within a day when it comes from a registry (one download at a time). */
export class ImageStore extends Context.Tag("roster/ImageStore")<ImageStore, {
  /** Present and reasonably current; `force` pulls a registry image even within the TTL. */
  readonly ensure: (image: string, options?: { readonly force?: boolean }) => Effect.Effect<void, ImageMissing | DockerError>
}>() {
  /** Holds what must be shared (one download at a time, what this process already ensured) and the services it was built with. */
  static readonly layer = Layer.effect(
    ImageStore,
    Effect.gen(function*() {
      const env = Context.add(Context.add(yield* captureHostFiles, Docker, yield* Docker), Reporter, yield* Reporter)
      // One permit for all: concurrent runs wait for a single download instead of racing their own.
      const lock = yield* Effect.makeSemaphore(1)
      const ensured = yield* Ref.make<ReadonlySet<string>>(new Set())
      const ensure = (image: string, options?: { readonly force?: boolean }) =>
        Effect.gen(function*() {
          if (!options?.force && (yield* Ref.get(ensured)).has(image)) return
          const file = layout(yield* Paths).imagePulls
          // An engine that does not answer is that, not a missing image (imageInspect answers undefined for a 404).
          const inspected = yield* (yield* Docker).imageInspect(image)
          const present = inspected !== undefined
          if (!isRegistryRef(image)) {
            if (!present) return yield* Effect.fail(new ImageMissing({ image, detail: "not built" }))
          } else if (options?.force || !present || !(yield* pulledRecently(file, image))) {
            yield* pull(file, image, present)
          }
          yield* Ref.update(ensured, (s) => new Set([...s, image]))
        }).pipe(lock.withPermits(1), Effect.provide(env))
      return { ensure }
    })
  )
}
