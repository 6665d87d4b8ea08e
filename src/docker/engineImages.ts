import { imageOf } from "./engineAnswers.js"
import { Effect, Option, Schema } from "effect"
import type { Readable } from "node:stream"
import type { DockerApi } from "./Docker.js"
import type { EngineCall } from "./engineCall.js"

/** One progress event of a build: a line of its output, a status, or why it failed. */
const BuildEvent = Schema.Struct({ stream: Schema.optional(Schema.String), error: Schema.optional(Schema.String), status: Schema.optional(Schema.String) })
const decodeBuildEvent = Schema.decodeUnknownOption(BuildEvent)

/** The engine's images: inspect (undefined when absent), pull and build with their progress, import a root filesystem. */
export const imageCalls = (call: EngineCall): Pick<DockerApi, "imageInspect" | "imagePull" | "imageBuild" | "imageImport"> => ({
  imageInspect: (ref) =>
    call("image inspect", (engine) => engine.getImage(ref).inspect()).pipe(
      Effect.flatMap(imageOf),
      Effect.catchIf((e) => e.statusCode === 404, () => Effect.succeed(undefined))
    ),

  imagePull: (ref, onProgress) =>
    call("pull", (engine, modem, abortSignal) =>
      new Promise<void>((resolve, reject) => {
        engine.pull(ref, { abortSignal }, (err: unknown, stream?: NodeJS.ReadableStream) => {
          if (err || !stream) return reject(err ?? new Error("no pull stream"))
          modem.followProgress(stream as Readable, (e) => (e ? reject(e) : resolve()), onProgress)
        })
      })),

  imageBuild: (contextDir, files, tag, onLine, labels) =>
    call("build", (engine, modem, abortSignal) =>
      engine.buildImage({ context: contextDir, src: [...files] }, { t: tag, labels: { ...labels }, rm: true, forcerm: true, abortSignal })
        .then((stream) =>
          new Promise<void>((resolve, reject) => {
            let failure: string | undefined
            modem.followProgress(
              stream as Readable,
              (e) => (e ? reject(e) : failure ? reject(new Error(failure)) : resolve()),
              (event) => {
                const ev = Option.getOrElse(decodeBuildEvent(event), () => ({} as typeof BuildEvent.Type))
                if (ev.error) failure = ev.error
                const text = ev.stream ?? ev.status ?? ev.error
                if (text) for (const l of text.split("\n")) if (l.trim() !== "") onLine(l)
              }
            )
          })
        )),

  imageImport: (tarball, ref) =>
    call("import", (engine, modem) =>
      new Promise<void>((resolve, reject) => {
        const colon = ref.lastIndexOf(":")
        const [repo, tag] = colon > ref.lastIndexOf("/") ? [ref.slice(0, colon), ref.slice(colon + 1)] : [ref, "latest"]
        engine.importImage(tarball, { repo, tag }, (err: unknown, stream?: NodeJS.ReadableStream) => {
          if (err || !stream) return reject(err ?? new Error("no import stream"))
          modem.followProgress(stream as Readable, (e) => (e ? reject(e) : resolve()), () => undefined)
        })
      }))
})
