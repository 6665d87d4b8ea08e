import { Effect, Schema } from "effect"
import { output, reporterCallback, step } from "../report/Reporter.js"
import * as fsp from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
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
  const busybox = yield* Effect.promise(async () => {
    for (const c of BUSYBOX_CANDIDATES) {
      const st = await fsp.stat(c).catch(() => undefined)
      if (st?.isFile()) return c
    }
    return undefined
  })
  if (!busybox) {
    return yield* Effect.fail(new BuildError({ detail: "a static busybox is needed: apt-get install -y busybox-static" }))
  }
  const ctx = yield* Effect.acquireRelease(
    Effect.promise(() => fsp.mkdtemp(path.join(os.tmpdir(), "roster-build-"))),
    (dir) => Effect.promise(() => fsp.rm(dir, { recursive: true, force: true }))
  )
  const src = path.join(packageRoot(), "box", "scripted")
  yield* Effect.tryPromise({
    try: async () => {
      await fsp.copyFile(path.join(src, "Dockerfile"), path.join(ctx, "Dockerfile"))
      await fsp.copyFile(path.join(src, "run-pi"), path.join(ctx, "run-pi"))
      await fsp.copyFile(busybox, path.join(ctx, "busybox"))
      await fsp.chmod(path.join(ctx, "busybox"), 0o755)
    },
    catch: (e) => new BuildError({ detail: String(e) })
  })
  const say = yield* reporterCallback
  if (!quiet) say(step("build-scripted", `building ${tag} (scripted engine: busybox, no model) …`))
  yield* docker.imageBuild(ctx, ["Dockerfile", "run-pi", "busybox"], tag, (line) => {
    if (!quiet) say(output("build-scripted", line))
  }, { "org.roster.engine": "scripted" }).pipe(Effect.mapError((e) => new BuildError({ detail: e.detail })))
  return tag
}, Effect.scoped)
