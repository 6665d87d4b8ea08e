import { Effect, Stream } from "effect"
import { notice, output, report, reporterCallback, step } from "../../report/Reporter.js"
import { Docker, type ContainerSpec } from "../../docker/Docker.js"
import { BuildError } from "../buildScripted.js"
import { boxDir, engineFiles, engineHash, pinnedPiVersion } from "./engineFiles.js"
import { buildOffline } from "./offline.js"

export const BASE_IMAGE = "node:24-bookworm-slim"
/** The Dockerfile's other stage: where the statx shim is compiled. */
const SHIM_IMAGE = "debian:bookworm-slim"

/** Can this machine get an image? Present, or pulled within 30 s. */
const canGet = (image: string) =>
  Effect.gen(function*() {
    const docker = yield* Docker
    // A question, not a step: an image that cannot be inspected or pulled means build from what is here (the other way).
    if (yield* docker.imageInspect(image).pipe(Effect.orElseSucceed(() => undefined))) return true
    return yield* docker.imagePull(image, () => undefined).pipe(
      Effect.timeout("30 seconds"),
      Effect.as(true),
      // No registry (the usual case here): false, and the image is built from the box's own files instead.
      Effect.orElseSucceed(() => false)
    )
  })

/** Can this machine get both of the Dockerfile's base images? */
const registryReachable = Effect.map(Effect.all([canGet(BASE_IMAGE), canGet(SHIM_IMAGE)]), ([a, b]) => a && b)

/** box/Dockerfile, for machines with a registry. */
const buildFromDockerfile = (tag: string, labels: Record<string, string>) =>
  Effect.gen(function*() {
    const docker = yield* Docker
    const say = yield* reporterCallback
    yield* report(step("box build", `building ${tag} from box/Dockerfile (${BASE_IMAGE})`))
    yield* docker.imageBuild(yield* boxDir, ["Dockerfile", ...(yield* engineFiles())], tag, (line) => say(output("box build", line)), {
      ...labels,
      "org.roster.build": "dockerfile"
    }).pipe(Effect.mapError((e) => new BuildError({ detail: e.message })))
  }).pipe(Effect.scoped)

/** Is `image` present and built from the engine files as they are now? */
export const imageIsCurrent = (image: string) =>
  Effect.gen(function*() {
    const info = yield* (yield* Docker).imageInspect(image)
    return info?.labels["org.roster.engine-hash"] === (yield* engineHash())
    // Not known to be current is rebuilt: the failure, if it is the engine's, shows again in the build itself.
  }).pipe(Effect.orElseSucceed(() => false))

/** `roster box build`: the Dockerfile when a registry answers, the offline builder otherwise (or when asked). */
export const buildBoxImage = Effect.fn("box.build")(function*(tag: string, offline: boolean) {
  const labels = { "org.roster.engine": "pi", "org.roster.pi-version": yield* pinnedPiVersion(), "org.roster.engine-hash": yield* engineHash() }
  if (!offline && (yield* registryReachable)) return yield* buildFromDockerfile(tag, labels)
  if (!offline) yield* report(notice(`no container registry answers (${BASE_IMAGE} can't be pulled): building offline`))
  yield* buildOffline(tag, labels)
})

export interface Captured {
  readonly exitCode: number
  readonly stdout: string
}

/** A short command in a throwaway, network-less, unprivileged container of `image`; its output collected. */
export const runCaptured = Effect.fn("box.runCaptured")(function*(image: string, cmd: ReadonlyArray<string>, runtime?: string) {
  const docker = yield* Docker
  const spec: ContainerSpec = {
    name: `roster-check-${Date.now().toString(36)}`,
    Image: image,
    Cmd: cmd,
    Env: ["HOME=/tmp", "PI_OFFLINE=1", "PI_SKIP_VERSION_CHECK=1", "PI_TELEMETRY=0"],
    Labels: { "roster.kind": "check" },
    User: "65532:65532",
    WorkingDir: "/tmp",
    OpenStdin: false, StdinOnce: false, AttachStdin: false, AttachStdout: true, AttachStderr: true, Tty: false,
    HostConfig: {
      AutoRemove: false, NetworkMode: "none", ExtraHosts: [], Dns: [], CapDrop: ["ALL"], SecurityOpt: ["no-new-privileges"],
      Tmpfs: { "/tmp": "rw,nosuid,nodev,size=67108864,mode=1777" }, Binds: [],
      ...(runtime ? { Runtime: runtime } : {})
    }
  }
  // The check's own result is what matters; a check container left (named roster-check-…, no network) holds nothing.
  const id = yield* Effect.acquireRelease(docker.containerCreate(spec), (id) => docker.containerRemove(id).pipe(Effect.ignore))
  const attached = yield* docker.containerAttach(id)
  const exited = yield* docker.containerWait(id)
  const out = yield* Effect.fork(Stream.runFold(Stream.merge(attached.stdout, attached.stderr), "", (acc, c) => acc + new TextDecoder().decode(c)))
  yield* docker.containerStart(id)
  const exitCode = yield* exited.pipe(Effect.timeout("60 seconds"))
  // The exit code is the check's answer; output that does not drain within 5 s after it is left out of the message only.
  return { exitCode, stdout: yield* out.await.pipe(Effect.flatten, Effect.timeout("5 seconds"), Effect.orElseSucceed(() => "")) } satisfies Captured
}, Effect.scoped)

/** `image`'s labels when the engine has it, else none (`roster box check` before it runs it). */
export const imageLabels = (image: string) => Effect.flatMap(Docker, (docker) => docker.imageInspect(image)).pipe(Effect.map((i) => i?.labels))
