import { FileSystem, Path } from "@effect/platform"
import { Clock, Context, Effect, FiberSet, Layer, Ref, Schema } from "effect"
import { Paths, layout } from "../../config/Paths.js"
import { Docker, type DockerError } from "../../docker/Docker.js"
import { atomicIn } from "../../fs/atomic.js"
import { notice, progress, progressDone, type Report, Reporter } from "../../report/Reporter.js"

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

/** What the store's layer is built from: the engine, the deployment's files and the reporter, taken once. */
export type ImageStoreEnv = Docker | Reporter | Paths | FileSystem.FileSystem | Path.Path

/** When each registry image was last pulled, in `state/image-pulls.json`, through file services taken once. */
const pullRecord = (atomic: ReturnType<typeof atomicIn>, file: string) => {
  const pullTimes = atomic.readJsonOptional(file).pipe(
    Effect.map((raw) => Schema.decodeUnknownOption(PullTimes)(raw).pipe((o) => (o._tag === "Some" ? o.value : {})))
  )
  return {
    pulledRecently: (image: string) =>
      Effect.gen(function*() {
        const at = (yield* pullTimes)[image]
        const now = yield* Clock.currentTimeMillis
        return typeof at === "number" && now - at >= 0 && now - at < PULL_TTL_MS
      }),
    recordPull: (image: string) =>
      Effect.gen(function*() {
        const map = yield* pullTimes
        yield* atomic.writeJson(file, { ...map, [image]: yield* Clock.currentTimeMillis })
      // A pull time not written means the next start asks the registry again: one more pull, nothing lost.
      }).pipe(Effect.ignore)
  }
}

/** What a pull works through, taken when the store is built: the engine, the reporter, the record of pulls. */
interface PullOver {
  readonly docker: Context.Tag.Service<Docker>
  readonly reporter: Context.Tag.Service<Reporter>
  readonly pulls: ReturnType<typeof pullRecord>
}

/** Pulls a registry image; its layers' progress goes to the Reporter (a terminal shows it, a log does not). */
const pull = ({ docker, pulls, reporter }: PullOver, image: string, present: boolean) =>
  Effect.gen(function*() {
    // The engine's progress callback is not a fiber: its reports run as fibers of this pull's scope.
    const run = yield* FiberSet.makeRuntime<never>()
    const say = (r: Report): void => void run(reporter.report(r))
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
      yield* pulls.recordPull(image)
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
      // What it works through is taken here, once: its calls need nothing of their caller.
      const docker = yield* Docker
      const pulls = pullRecord(atomicIn(yield* FileSystem.FileSystem, yield* Path.Path), layout(yield* Paths).imagePulls)
      const over: PullOver = { docker, reporter: yield* Reporter, pulls }
      // One permit for all: concurrent runs wait for a single download instead of racing their own.
      const lock = yield* Effect.makeSemaphore(1)
      const ensured = yield* Ref.make<ReadonlySet<string>>(new Set())
      const ensure = (image: string, options?: { readonly force?: boolean }) =>
        Effect.gen(function*() {
          if (!options?.force && (yield* Ref.get(ensured)).has(image)) return
          // An engine that does not answer is that, not a missing image (imageInspect answers undefined for a 404).
          const inspected = yield* docker.imageInspect(image)
          const present = inspected !== undefined
          if (!isRegistryRef(image)) {
            if (!present) return yield* Effect.fail(new ImageMissing({ image, detail: "not built" }))
          } else if (options?.force || !present || !(yield* pulls.pulledRecently(image))) {
            yield* pull(over, image, present)
          }
          yield* Ref.update(ensured, (s) => new Set([...s, image]))
        }).pipe(lock.withPermits(1))
      return { ensure }
    })
  )
}
