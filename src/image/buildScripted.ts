import { Effect, Schema } from "effect"
import { output, reporterCallback, step } from "../report/Reporter.js"
import { FileSystem, Path } from "@effect/platform"
import { Docker } from "../docker/Docker.js"
import { packageRoot } from "./packageRoot.js"

export class BuildError extends Schema.TaggedError<BuildError>()("BuildError", { detail: Schema.String }) {
  override get message() {
    return `the box image could not be built: ${this.detail}`
  }
}

export const SCRIPTED_TAG = "roster-scripted:1"
const BUSYBOX_CANDIDATES = ["/bin/busybox", "/usr/bin/busybox"]

/**
 * The scripted-engine image (a busybox stand-in for pi, FROM scratch, no registry needed):
 * what the integration tests and the rehearsal demo run until the real pi image is built.
 */
export const buildScriptedImage = Effect.fn("box.buildScripted")(function*(tag: string, quiet = false) {
  const docker = yield* Docker
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  let busybox: string | undefined
  for (const c of BUSYBOX_CANDIDATES) {
    if ((yield* fs.stat(c).pipe(Effect.option)).pipe((s) => s._tag === "Some" && s.value.type === "File")) {
      busybox = c
      break
    }
  }
  if (!busybox) {
    return yield* Effect.fail(new BuildError({ detail: "a static busybox is needed: apt-get install -y busybox-static" }))
  }
  const ctx = yield* fs.makeTempDirectoryScoped({ prefix: "roster-build-" })
  const src = path.join(yield* packageRoot, "box", "scripted")
  yield* Effect.gen(function*() {
    yield* fs.copyFile(path.join(src, "Dockerfile"), path.join(ctx, "Dockerfile"))
    yield* fs.copyFile(path.join(src, "run-pi"), path.join(ctx, "run-pi"))
    yield* fs.copyFile(busybox, path.join(ctx, "busybox"))
    yield* fs.chmod(path.join(ctx, "busybox"), 0o755)
  }).pipe(Effect.mapError((e) => new BuildError({ detail: e.message })))
  const say = yield* reporterCallback
  if (!quiet) say(step("build-scripted", `building ${tag} (scripted engine: busybox, no model) …`))
  yield* docker.imageBuild(ctx, ["Dockerfile", "run-pi", "busybox"], tag, (line) => {
    if (!quiet) say(output("build-scripted", line))
  }, { "org.roster.engine": "scripted" }).pipe(Effect.mapError((e) => new BuildError({ detail: e.detail })))
  return tag
}, Effect.scoped)
