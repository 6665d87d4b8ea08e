import type Dockerode from "dockerode"
import { Effect, Layer, Option, Schema } from "effect"
import * as NodeStream from "@effect/platform-node/NodeStream"
import { PassThrough, type Readable } from "node:stream"
import type { Duplex } from "node:stream"
import { type Attached, type ContainerSpec, Docker, type DockerApi, DockerError, DockerUnavailable, type NetworkInfo, type PullProgress } from "./Docker.js"

interface EngineError {
  readonly statusCode?: number
  readonly message?: string
  readonly json?: { readonly message?: string }
}

const describe = (cause: unknown): { detail: string; statusCode?: number } => {
  const e = cause as EngineError
  const detail = e?.json?.message ?? e?.message ?? String(cause)
  return typeof e?.statusCode === "number" ? { detail, statusCode: e.statusCode } : { detail }
}

/**
 * The engine's multiplexed attach stream (8-byte frame headers: stream type, size) split into
 * stdout and stderr, with backpressure: while either reader is behind, the socket is paused, so
 * a box that floods its output is slowed to what roster writes instead of piling up in memory
 * (dockerode's demuxStream ignores a full reader).
 */
const demux = (src: Readable, out: PassThrough, err: PassThrough) => {
  let pending: Buffer = Buffer.alloc(0)
  const resume = () => {
    if (!out.writableNeedDrain && !err.writableNeedDrain) src.resume()
  }
  src.on("data", (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk])
    let full = false
    while (pending.length >= 8) {
      const size = pending.readUInt32BE(4)
      if (pending.length < 8 + size) break
      const target = pending[0] === 2 ? err : out
      if (!target.write(pending.subarray(8, 8 + size))) full = true
      pending = pending.subarray(8 + size)
    }
    if (full) {
      src.pause()
      out.once("drain", resume)
      err.once("drain", resume)
    }
  })
}

interface Modem {
  readonly dial: (opts: object, cb: (err: unknown, res: Readable) => void) => void
  readonly demuxStream: (src: Readable, out: PassThrough, err: PassThrough) => void
  readonly followProgress: (s: Readable, done: (e: unknown) => void, progress: (p: PullProgress) => void) => void
}

/** 404 (gone) and 304/409 (not running) are answers, not failures, for the calls that use this. */
/** The engine's answer to a container wait: the exit code, or why it could not wait. */
const WaitAnswer = Schema.Struct({
  StatusCode: Schema.optional(Schema.Number),
  Error: Schema.optional(Schema.NullOr(Schema.Struct({ Message: Schema.optional(Schema.String) })))
})
const decodeWaitAnswer = Schema.decodeUnknownOption(Schema.parseJson(WaitAnswer))

const absent = (e: DockerError) => e.statusCode === 404 || e.statusCode === 409 || e.statusCode === 304

const toNetworkInfo = (raw: Dockerode.NetworkInspectInfo): NetworkInfo => ({
  id: raw.Id,
  name: raw.Name,
  driver: raw.Driver,
  internal: raw.Internal === true,
  options: raw.Options ?? {},
  subnets: (raw.IPAM?.Config ?? []).map((c) => ({ subnet: c.Subnet ?? "", gateway: c.Gateway ?? "" })),
  labels: raw.Labels ?? {},
  containers: Object.keys(raw.Containers ?? {}).length
})

/**
 * The Engine API over dockerode. dockerode (with its ssh and grpc stack) loads on the first
 * call, so commands that never reach the engine (help, init, runs) start without it.
 */
export const makeDockerApi = (load: () => Promise<Dockerode>): DockerApi => {
  let loaded: Promise<Dockerode> | undefined
  const call = <A>(operation: string, f: (engine: Dockerode, modem: Modem, signal: AbortSignal) => Promise<A>) =>
    Effect.tryPromise({
      try: async (signal) => {
        const engine = await (loaded ??= load())
        return f(engine, engine.modem as unknown as Modem, signal)
      },
      catch: (cause) => new DockerError({ operation, ...describe(cause) })
    }).pipe(Effect.withSpan(`docker.${operation}`))

  const networkInspect = (name: string) =>
    call("network inspect", (engine) => engine.getNetwork(name).inspect()).pipe(
      Effect.map((raw) => toNetworkInfo(raw as Dockerode.NetworkInspectInfo)),
      Effect.catchIf((e) => e.statusCode === 404, () => Effect.succeed(undefined))
    )

  return {
    ping: call("ping", (engine) => engine.ping()).pipe(
      Effect.timeout("5 seconds"),
      Effect.asVoid,
      Effect.mapError((e) => new DockerUnavailable({ detail: e._tag === "TimeoutException" ? "no answer in 5 s" : e.detail }))
    ),

    networkInspect,

    networkCreate: (spec) =>
      call("network create", (engine) =>
        engine.createNetwork({
          Name: spec.name,
          Driver: "bridge",
          Internal: spec.internal,
          CheckDuplicate: true,
          Options: { ...spec.options },
          Labels: { ...spec.labels }
        })).pipe(
          Effect.zipRight(networkInspect(spec.name)),
          Effect.flatMap((info) =>
            info ? Effect.succeed(info) : Effect.fail(new DockerError({ operation: "network create", detail: `${spec.name} vanished after creation` }))
          )
        ),

    networkList: (labels) =>
      call("network list", (engine) => engine.listNetworks({ filters: { label: [...labels] } })).pipe(
        Effect.map((list) => list.map((raw) => toNetworkInfo(raw as Dockerode.NetworkInspectInfo)))
      ),

    networkRemove: (name) =>
      call("network remove", (engine) => engine.getNetwork(name).remove()).pipe(
        Effect.asVoid,
        Effect.catchIf((e) => e.statusCode === 404, () => Effect.void)
      ),

    imageInspect: (ref) =>
      call("image inspect", (engine) => engine.getImage(ref).inspect()).pipe(
        Effect.map((raw) => ({ id: raw.Id, created: raw.Created, labels: raw.Config?.Labels ?? {} })),
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
                  const ev = event as { stream?: string; error?: string; status?: string }
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
        })),

    containerCreate: (spec: ContainerSpec) =>
      call("create", (engine) =>
        engine.createContainer(structuredClone(spec) as Dockerode.ContainerCreateOptions)).pipe(
          Effect.map((c) => c.id)
        ),

    containerAttach: (id, attachOptions) =>
      Effect.acquireRelease(
        call("attach", (_engine, modem, abortSignal) =>
          new Promise<{ socket: Duplex; modem: Modem }>((resolve, reject) =>
            modem.dial({
              path: `/containers/${id}/attach?`,
              method: "POST",
              abortSignal,
              isStream: true,
              hijack: true,
              openStdin: true,
              statusCodes: { 101: true, 200: true, 404: "no such container", 500: "server error" },
              options: attachOptions?.replay
                ? { logs: true, stream: true, stdin: false, stdout: true, stderr: true }
                : { stream: true, stdin: true, stdout: true, stderr: true }
            }, (err, res) => (err ? reject(err) : resolve({ socket: res as unknown as Duplex, modem }))))),
        ({ socket }) => Effect.sync(() => socket.destroy())
      ).pipe(Effect.map(({ socket }): Attached => {
        const out = new PassThrough()
        const err = new PassThrough()
        demux(socket as unknown as Readable, out, err)
        // The outputs end when the raw stream does.
        const end = () => {
          out.end()
          err.end()
        }
        socket.once("end", end)
        socket.once("close", end)
        socket.once("error", end)
        const toStream = (s: PassThrough) =>
          NodeStream.fromReadable<DockerError>(() => s, (cause) => new DockerError({ operation: "attach", ...describe(cause) }))
        return {
          stdout: toStream(out),
          stderr: toStream(err),
          write: (chunk) =>
            Effect.async<void, DockerError>((resume) => {
              socket.write(chunk, (e) => resume(e ? Effect.fail(new DockerError({ operation: "stdin", ...describe(e) })) : Effect.void))
            }),
          closeStdin: Effect.sync(() => {
            socket.end()
          })
        }
      })),

    containerWait: (id) =>
      call("wait", (_engine, modem, abortSignal) =>
        new Promise<Readable>((resolve, reject) =>
          modem.dial({
            path: `/containers/${id}/wait?`,
            method: "POST",
            abortSignal,
            isStream: true,
            statusCodes: { 200: true, 400: "bad parameter", 404: "no such container", 500: "server error" },
            options: { condition: "next-exit" }
          }, (err, res) => (err ? reject(err) : resolve(res))))).pipe(
          Effect.map((res) =>
            Effect.async<number, DockerError>((resume) => {
              let body = ""
              res.setEncoding("utf8")
              res.on("data", (c: string) => (body += c))
              res.once("error", (e) => resume(Effect.fail(new DockerError({ operation: "wait", ...describe(e) }))))
              res.once("end", () => {
                const parsed = Option.getOrUndefined(decodeWaitAnswer(body))
                if (!parsed) return resume(Effect.fail(new DockerError({ operation: "wait", detail: `unreadable answer: ${body.slice(0, 200)}` })))
                if (parsed.Error?.Message) {
                  return resume(Effect.fail(new DockerError({ operation: "wait", detail: parsed.Error.Message })))
                }
                resume(Effect.succeed(parsed.StatusCode ?? -1))
              })
              return Effect.sync(() => res.destroy())
            })
          )
        ),

    containerStart: (id) => call("start", (engine, _modem, abortSignal) => engine.getContainer(id).start({ abortSignal })).pipe(Effect.asVoid),

    containerKill: (id, signal = "SIGKILL") =>
      call("kill", (engine, _modem, abortSignal) => engine.getContainer(id).kill({ signal, abortSignal })).pipe(
        Effect.as(true),
        Effect.catchIf(absent, () => Effect.succeed(false))
      ),

    containerRemove: (id) =>
      call("remove", (engine) => engine.getContainer(id).remove({ force: true, v: true })).pipe(
        Effect.asVoid,
        Effect.catchIf(absent, () => Effect.void)
      ),

    containerList: (labels) =>
      call("list", (engine, _modem, abortSignal) =>
        engine.listContainers({ all: true, filters: { label: [...labels] }, abortSignal })).pipe(
          Effect.map((list) =>
            list.map((c) => ({ id: c.Id, names: c.Names, state: c.State, labels: c.Labels ?? {}, created: c.Created * 1000 }))
          )
        ),

    containerStats: (id) =>
      call("stats", (engine) => engine.getContainer(id).stats({ stream: false })).pipe(
        Effect.map((s) => {
          // The engine's two samples: CPU time used between them over the time that passed, per core.
          const cpu = s.cpu_stats.cpu_usage.total_usage - s.precpu_stats.cpu_usage.total_usage
          const system = (s.cpu_stats.system_cpu_usage ?? 0) - (s.precpu_stats.system_cpu_usage ?? 0)
          const cores = s.cpu_stats.online_cpus || s.cpu_stats.cpu_usage.percpu_usage?.length || 1
          const cache = (s.memory_stats.stats as Record<string, number> | undefined)?.inactive_file ?? 0
          return {
            cpuPercent: system > 0 && cpu > 0 ? (cpu / system) * cores * 100 : 0,
            memoryBytes: Math.max(0, (s.memory_stats.usage ?? 0) - cache)
          }
        }),
        Effect.catchIf(absent, () => Effect.succeed(undefined))
      )
  }
}

/** dockerode honours DOCKER_HOST / the default socket. */
export const DockerLive = Layer.sync(Docker, () => makeDockerApi(() => import("dockerode").then((m) => new m.default())))
