import { Clock, Context, Deferred, Effect, Fiber, Layer, Mailbox, PubSub, Queue, Ref, Stream } from "effect"
import { type ContainerSpec, Docker, DockerError, DockerUnavailable, type ImageInfo, type NetworkInfo } from "./Docker.js"
import { statsOf } from "./engineAnswers.js"

/** What a scripted box does once started. */
export interface ContainerScript {
  /** Written to stdout in order, one chunk each. */
  readonly stdout?: ReadonlyArray<string>
  readonly stderr?: ReadonlyArray<string>
  /** Exit code after the output; ignored when `hang`. */
  readonly exitCode?: number
  /** Runs until killed (exit 137). */
  readonly hang?: boolean
  /** An rpc engine: each line written to stdin gives these stdout lines (newline added). */
  readonly onStdin?: (line: string) => ReadonlyArray<string>
  /** Exits 0 when stdin is closed, as pi does in rpc mode. */
  readonly exitOnEof?: boolean
}

/** A box in the fake engine: its spec, state, output mailboxes, what was written to its stdin, its script. */
export interface FakeContainer {
  readonly id: string
  readonly spec: ContainerSpec
  /** Its name now (its spec's, until it is renamed). */
  name: string
  state: "created" | "running" | "exited" | "removed"
  readonly exit: Deferred.Deferred<number>
  readonly stdout: Mailbox.Mailbox<Uint8Array>
  readonly stderr: Mailbox.Mailbox<Uint8Array>
  readonly stdin: Array<string>
  stdinClosed: boolean
  readonly script: ContainerScript
  readonly created: number
}

/** What each engine operation is recorded with. */
export interface FakeCallArgs {
  readonly ping: null
  readonly runtimes: null
  readonly networkInspect: string
  readonly networkCreate: unknown
  readonly networkList: ReadonlyArray<string>
  readonly networkRemove: string
  readonly imageInspect: string
  readonly imagePull: string
  readonly imageBuild: { readonly contextDir: string; readonly files: ReadonlyArray<string>; readonly tag: string }
  readonly imageImport: string
  readonly containerCreate: ContainerSpec
  readonly containerAttach: string
  readonly containerWait: string
  readonly containerStart: string
  readonly containerKill: { readonly id: string; readonly signal: string | undefined }
  readonly containerRemove: string
  readonly containerList: ReadonlyArray<string>
  readonly containerRename: { readonly id: string; readonly name: string }
  readonly containerStats: string
}

/** The name of an engine operation the fake records. */
export type FakeOp = keyof FakeCallArgs

/** One call the code under test made, with what it asked for. */
export type FakeCall = { readonly [K in FakeOp]: { readonly op: K; readonly arg: FakeCallArgs[K] } }[FakeOp]

/** How the fake engine behaves: up or down, its networks and images, what each box does, pulls, failures, a hook before each call. */
export interface DockerFakeOptions {
  readonly up?: boolean
  readonly networks?: ReadonlyArray<NetworkInfo>
  readonly images?: Readonly<Record<string, ImageInfo>>
  readonly script?: (spec: ContainerSpec) => ContainerScript
  /** How a pull behaves: "ok" adds the image, "offline" fails. */
  readonly pull?: "ok" | "offline"
  readonly pullDelay?: Effect.Effect<void>
  readonly networkCreate?: "ok" | "fail"
  /** The runtimes the engine has registered (default: runc only). */
  readonly runtimes?: ReadonlyArray<string>
  /** Runs before each call is carried out, after it is recorded: a test can hold an operation (Effect.never) to interrupt there. */
  readonly before?: (op: string, arg: unknown) => Effect.Effect<void>
  /** A running box's stats as the engine's JSON answer (decoded as the live engine's is); default: 1.5 % CPU, 32 MiB. */
  readonly stats?: (container: FakeContainer) => unknown
}

/** A stats answer shaped as the engine's: 1.5 % of one core over the sample, 32 MiB in use. */
const ENGINE_STATS = {
  cpu_stats: { cpu_usage: { total_usage: 1_015 }, system_cpu_usage: 2_000, online_cpus: 1 },
  precpu_stats: { cpu_usage: { total_usage: 1_000 }, system_cpu_usage: 1_000, online_cpus: 1 },
  memory_stats: { usage: 32 * 1024 * 1024, stats: { inactive_file: 0 } }
}

/** The fake's record of what the code under test asked the engine to do. */
export class DockerFake extends Context.Tag("roster/DockerFake")<DockerFake, {
  readonly calls: Ref.Ref<ReadonlyArray<FakeCall>>
  readonly containers: Map<string, FakeContainer>
  readonly networks: Map<string, NetworkInfo>
  readonly images: Map<string, ImageInfo>
  readonly callsOf: <K extends FakeOp>(op: K) => Effect.Effect<ReadonlyArray<FakeCallArgs[K]>>
  /** Every call as it is made (subscribe before the action that makes it). */
  readonly events: Stream.Stream<FakeCall>
  /**
   * Completes with the first call of `op` (already made, or the next one) that `where` accepts:
   * a test waits on what the engine was asked, not on a poll.
   */
  readonly waitFor: <K extends FakeOp>(op: K, where?: (arg: FakeCallArgs[K]) => boolean) => Effect.Effect<FakeCallArgs[K]>
  /** A running box exits with this code now (as if its process ended on its own). */
  readonly exit: (id: string, code: number) => Effect.Effect<void>
}>() {}

const encoder = new TextEncoder()

/** A network record shaped like roster's locked network (internal, no ICC), with overrides. */
export const lockedNetwork = (overrides: Partial<NetworkInfo> = {}): NetworkInfo => ({
  id: "fakenet0123456789",
  name: "roster-locked",
  driver: "bridge",
  internal: true,
  options: { "com.docker.network.bridge.enable_icc": "false" },
  subnets: [{ subnet: "172.30.0.0/16", gateway: "172.30.0.1" }],
  labels: { "roster.network": "locked" },
  containers: 0,
  ...overrides
})

/** An image record for the fake engine (created now unless given). */
export const fakeImage = (created = new Date().toISOString()): ImageInfo => ({ id: "sha256:fake", created, labels: {} })

/** The fake Docker engine as a layer: provides `Docker` and `DockerFake` (its calls, containers and events). */
export const makeDockerTest = (options: DockerFakeOptions = {}) =>
  Layer.effectContext(Effect.gen(function*() {
    const calls = yield* Ref.make<ReadonlyArray<FakeCall>>([])
    const hub = yield* PubSub.unbounded<FakeCall>()
    const containers = new Map<string, FakeContainer>()
    const networks = new Map((options.networks ?? [lockedNetwork()]).map((n) => [n.name, n]))
    const images = new Map(Object.entries(options.images ?? { "roster-box:1": fakeImage() }))
    let counter = 0
    const record = <K extends FakeOp>(op: K, arg: FakeCallArgs[K]) => {
      const call = { op, arg } as FakeCall
      return Ref.update(calls, (cs) => [...cs, call]).pipe(
        Effect.zipRight(PubSub.publish(hub, call)),
        Effect.zipRight(options.before ? options.before(op, arg) : Effect.void)
      )
    }
    const callsOf = <K extends FakeOp>(op: K) =>
      Ref.get(calls).pipe(Effect.map((cs) => cs.filter((c) => c.op === op).map((c) => c.arg as FakeCallArgs[K])))
    // The engine takes a container's id or its name.
    const lookup = (ref: string) => containers.get(ref) ?? [...containers.values()].find((c) => c.name === ref && c.state !== "removed")
    const find = (op: string, id: string) => {
      const c = lookup(id)
      return c && c.state !== "removed"
        ? Effect.succeed(c)
        : Effect.fail(new DockerError({ operation: op, detail: `no such container: ${id}`, statusCode: 404 }))
    }
    const finish = (c: FakeContainer, code: number) =>
      Effect.gen(function*() {
        if (c.state !== "running") return
        c.state = c.spec.HostConfig.AutoRemove ? "removed" : "exited"
        yield* c.stdout.end
        yield* c.stderr.end
        yield* Deferred.succeed(c.exit, code)
      })

    const docker = Docker.of({
      ping: options.up === false
        ? Effect.fail(new DockerUnavailable({ detail: "connect ENOENT /var/run/docker.sock" }))
        : record("ping", null),
      runtimes: record("runtimes", null).pipe(Effect.as(options.runtimes ?? ["runc"])),
      networkInspect: (name) => record("networkInspect", name).pipe(Effect.as(networks.get(name))),
      networkCreate: (spec) =>
        Effect.gen(function*() {
          yield* record("networkCreate", spec)
          if (options.networkCreate === "fail") {
            return yield* Effect.fail(new DockerError({ operation: "network create", detail: "permission denied" }))
          }
          const info: NetworkInfo = {
            id: `net${networks.size}`,
            name: spec.name,
            driver: "bridge",
            internal: spec.internal,
            options: spec.options,
            subnets: [{ subnet: "172.30.0.0/16", gateway: "172.30.0.1" }],
            labels: spec.labels,
            containers: 0
          }
          networks.set(spec.name, info)
          return info
        }),
      networkList: (labels) =>
        record("networkList", labels).pipe(Effect.as([...networks.values()].filter((n) =>
          labels.every((l) => {
            const [k, v] = l.split("=")
            return k !== undefined && (v === undefined ? k in n.labels : n.labels[k] === v)
          })
        ))),
      networkRemove: (name) => record("networkRemove", name).pipe(Effect.tap(() => Effect.sync(() => networks.delete(name))), Effect.asVoid),
      imageInspect: (ref) => record("imageInspect", ref).pipe(Effect.as(images.get(ref))),
      imagePull: (ref, onProgress) =>
        Effect.gen(function*() {
          yield* record("imagePull", ref)
          if (options.pullDelay) yield* options.pullDelay
          if (options.pull === "offline") {
            return yield* Effect.fail(new DockerError({ operation: "pull", detail: "dial tcp: lookup registry: no such host" }))
          }
          onProgress({ status: "Downloaded newer image" })
          images.set(ref, fakeImage())
        }),
      imageBuild: (contextDir, files, tag) =>
        record("imageBuild", { contextDir, files, tag }).pipe(Effect.tap(() => Effect.sync(() => images.set(tag, fakeImage())))),
      imageImport: (_tarball, ref) =>
        record("imageImport", ref).pipe(Effect.tap(() => Effect.sync(() => images.set(ref, fakeImage())))),
      // As a real engine: a create once asked is carried out whether or not its caller still waits for the answer.
      containerCreate: (spec) =>
        Effect.gen(function*() {
          yield* record("containerCreate", spec)
          const id = `fake${++counter}`
          containers.set(id, {
            id,
            spec,
            name: spec.name,
            state: "created",
            exit: yield* Deferred.make<number>(),
            stdout: yield* Mailbox.make<Uint8Array>(),
            stderr: yield* Mailbox.make<Uint8Array>(),
            stdin: [],
            stdinClosed: false,
            script: options.script?.(spec) ?? { exitCode: 0 },
            created: yield* Clock.currentTimeMillis
          })
          return id
        }).pipe(Effect.forkDaemon, Effect.flatMap(Fiber.join)),
      containerAttach: (id) =>
        Effect.gen(function*() {
          yield* record("containerAttach", id)
          const c = yield* find("attach", id)
          return {
            stdout: Mailbox.toStream(c.stdout),
            stderr: Mailbox.toStream(c.stderr),
            write: (chunk: string) =>
              Effect.gen(function*() {
                c.stdin.push(chunk)
                if (!c.script.onStdin || c.state !== "running") return
                for (const line of chunk.split("\n").filter((l) => l !== "")) {
                  yield* c.stdout.offerAll(c.script.onStdin(line).map((o) => encoder.encode(`${o}\n`)))
                }
              }),
            closeStdin: Effect.gen(function*() {
              c.stdinClosed = true
              if (c.script.exitOnEof) yield* finish(c, 0)
            })
          }
        }),
      containerWait: (id) =>
        Effect.gen(function*() {
          yield* record("containerWait", id)
          const c = yield* find("wait", id)
          return Deferred.await(c.exit)
        }),
      containerStart: (id) =>
        Effect.gen(function*() {
          yield* record("containerStart", id)
          const c = yield* find("start", id)
          c.state = "running"
          yield* c.stdout.offerAll((c.script.stdout ?? []).map((s) => encoder.encode(s)))
          yield* c.stderr.offerAll((c.script.stderr ?? []).map((s) => encoder.encode(s)))
          if (!c.script.hang) yield* finish(c, c.script.exitCode ?? 0)
        }),
      containerKill: (id, signal) =>
        Effect.gen(function*() {
          yield* record("containerKill", { id, signal })
          const c = lookup(id)
          if (!c || c.state !== "running") return false
          yield* finish(c, 137)
          return true
        }),
      containerRemove: (id) =>
        Effect.gen(function*() {
          yield* record("containerRemove", id)
          const c = lookup(id)
          if (c) {
            yield* finish(c, 137)
            c.state = "removed"
          }
        }),
      containerList: (labels, name) =>
        record("containerList", labels).pipe(Effect.as(
          [...containers.values()]
            .filter((c) => c.state !== "removed" && (name === undefined || c.name.includes(name)))
            .filter((c) =>
              labels.every((l) => {
                const [k, v] = l.split("=")
                return k !== undefined && (v === undefined ? k in c.spec.Labels : c.spec.Labels[k] === v)
              })
            )
            .map((c) => ({ id: c.id, names: [`/${c.name}`], state: c.state, labels: c.spec.Labels, created: c.created }))
        )),
      containerRename: (id, name) =>
        Effect.gen(function*() {
          yield* record("containerRename", { id, name })
          const c = yield* find("rename", id)
          if ([...containers.values()].some((o) => o !== c && o.name === name && o.state !== "removed")) {
            return yield* Effect.fail(new DockerError({ operation: "rename", detail: `the name ${name} is in use`, statusCode: 409 }))
          }
          c.name = name
        }),
      containerStats: (id) =>
        record("containerStats", id).pipe(Effect.flatMap(() => {
          const c = lookup(id)
          return c && c.state === "running" ? statsOf(options.stats?.(c) ?? ENGINE_STATS) : Effect.succeed(undefined)
        }))
    })

    const fake = DockerFake.of({
      calls,
      containers,
      networks,
      images,
      callsOf,
      events: Stream.fromPubSub(hub),
      waitFor: <K extends FakeOp>(op: K, where: (arg: FakeCallArgs[K]) => boolean = () => true) =>
        Effect.scoped(Effect.gen(function*() {
          // Subscribed before looking back, so a call made in between is not missed.
          const sub = yield* PubSub.subscribe(hub)
          const past = (yield* callsOf(op)).find(where)
          if (past !== undefined) return past
          for (;;) {
            const next = yield* Queue.take(sub)
            if (next.op === op && where(next.arg as FakeCallArgs[K])) return next.arg as FakeCallArgs[K]
          }
        })),
      exit: (id, code) => Effect.suspend(() => {
        const c = containers.get(id)
        return c && c.state === "running" ? finish(c, code) : Effect.void
      })
    })
    return Context.make(Docker, docker).pipe(Context.add(DockerFake, fake))
  }))
