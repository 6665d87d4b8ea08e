import { Context, Effect, Schema, Scope, Stream } from "effect"

/** The subset of the Engine API's container-create body roster uses (field names as the API spells them). */
export interface ContainerSpec {
  readonly name: string
  readonly Image: string
  readonly Cmd: ReadonlyArray<string>
  readonly Entrypoint?: ReadonlyArray<string>
  readonly Env: ReadonlyArray<string>
  readonly Labels: Readonly<Record<string, string>>
  readonly User: string
  readonly WorkingDir: string
  readonly OpenStdin: boolean
  readonly StdinOnce: boolean
  readonly AttachStdin: boolean
  readonly AttachStdout: boolean
  readonly AttachStderr: boolean
  readonly Tty: false
  readonly HostConfig: {
    readonly AutoRemove: boolean
    readonly NetworkMode: string
    readonly ExtraHosts: ReadonlyArray<string>
    readonly Dns: ReadonlyArray<string>
    readonly CapDrop: ReadonlyArray<string>
    readonly SecurityOpt: ReadonlyArray<string>
    readonly PidsLimit?: number
    readonly Memory?: number
    readonly NanoCpus?: number
    readonly Tmpfs: Readonly<Record<string, string>>
    readonly Binds: ReadonlyArray<string>
    readonly Init?: boolean
    /** The OCI runtime the engine starts the box under (runc when absent; runsc is gVisor). */
    readonly Runtime?: string
  }
}

export interface NetworkInfo {
  readonly id: string
  readonly name: string
  readonly driver: string
  readonly internal: boolean
  readonly options: Readonly<Record<string, string>>
  readonly subnets: ReadonlyArray<{ readonly subnet: string; readonly gateway: string }>
  readonly labels: Readonly<Record<string, string>>
  /** Containers attached right now (from an inspect; a list leaves it empty). */
  readonly containers: number
}

export interface NetworkSpec {
  readonly name: string
  readonly internal: boolean
  readonly options: Readonly<Record<string, string>>
  readonly labels: Readonly<Record<string, string>>
}

export interface ImageInfo {
  readonly id: string
  readonly created: string
  readonly labels: Readonly<Record<string, string>>
}

export interface ContainerSummary {
  readonly id: string
  readonly names: ReadonlyArray<string>
  readonly state: string
  readonly labels: Readonly<Record<string, string>>
  /** When the engine created it, ms since the epoch. */
  readonly created: number
}

/** The box's output, demultiplexed. Both streams end when the container's output does. */
export interface Attached {
  readonly stdout: Stream.Stream<Uint8Array, DockerError>
  readonly stderr: Stream.Stream<Uint8Array, DockerError>
  /** Writes to the box's stdin (only when created with OpenStdin); `closeStdin` sends EOF. */
  readonly write: (chunk: string) => Effect.Effect<void, DockerError>
  readonly closeStdin: Effect.Effect<void>
}

export interface PullProgress {
  readonly status: string
  readonly id?: string
  readonly progress?: string
}

const START_ENGINE = "Start it (sudo systemctl start docker, or dockerd &) or point DOCKER_HOST at it; on Debian: sudo apt-get install -y docker.io"

// What a socket says when nothing listens, the socket file is missing, or we may not use it.
const UNREACHABLE = /ECONNREFUSED|ENOENT|EACCES|EPIPE|ECONNRESET|socket hang up|connect E[A-Z]+/

/** An engine call that failed: the operation, what the engine said, and its status code. */
export class DockerError extends Schema.TaggedError<DockerError>()("DockerError", {
  operation: Schema.String,
  detail: Schema.String,
  statusCode: Schema.optional(Schema.Number)
}) {
  /** The engine did not answer at all (as opposed to answering with an error). */
  get unreachable() {
    return this.statusCode === undefined && UNREACHABLE.test(this.detail)
  }
  override get message() {
    return this.unreachable
      ? `the Docker engine is not answering (docker ${this.operation}: ${this.detail}). ${START_ENGINE}`
      : `docker ${this.operation} failed: ${this.detail}`
  }
}

/** The Docker engine does not answer, with how to start it. */
export class DockerUnavailable extends Schema.TaggedError<DockerUnavailable>()("DockerUnavailable", {
  detail: Schema.String
}) {
  override get message() {
    return `the Docker engine is not answering (${this.detail}). ${START_ENGINE}`
  }
}

/** The Engine API, as roster needs it. Live: dockerode. Test: a scripted fake that records every call. */
export interface DockerApi {
  readonly ping: Effect.Effect<void, DockerUnavailable>
  /** The OCI runtimes the engine has registered, by name (`runc`, and `runsc` where gVisor is set up). */
  readonly runtimes: Effect.Effect<ReadonlyArray<string>, DockerError>
  readonly networkInspect: (name: string) => Effect.Effect<NetworkInfo | undefined, DockerError>
  readonly networkCreate: (spec: NetworkSpec) => Effect.Effect<NetworkInfo, DockerError>
  /** Networks carrying every one of these labels ("key" or "key=value"). */
  readonly networkList: (labels: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<NetworkInfo>, DockerError>
  /** Removes a network; one already gone is not an error. */
  readonly networkRemove: (name: string) => Effect.Effect<void, DockerError>
  readonly imageInspect: (ref: string) => Effect.Effect<ImageInfo | undefined, DockerError>
  readonly imagePull: (ref: string, onProgress: (p: PullProgress) => void) => Effect.Effect<void, DockerError>
  /** Builds an image from a folder (the files listed, Dockerfile among them), streaming build output lines. */
  readonly imageBuild: (
    contextDir: string,
    files: ReadonlyArray<string>,
    tag: string,
    onLine: (line: string) => void,
    labels?: Readonly<Record<string, string>>
  ) => Effect.Effect<void, DockerError>
  /** `docker import`: a root filesystem tarball becomes an image tagged `ref`. */
  readonly imageImport: (tarball: NodeJS.ReadableStream, ref: string) => Effect.Effect<void, DockerError>
  readonly containerCreate: (spec: ContainerSpec) => Effect.Effect<string, DockerError>
  /**
   * Attached before start so no byte of output is lost; the attachment ends with the scope.
   * `replay` (a box adopted while it runs) first replays what it printed so far from its log.
   */
  readonly containerAttach: (id: string, options?: { readonly replay?: boolean }) => Effect.Effect<Attached, DockerError, Scope.Scope>
  /**
   * Registers a wait for the container's next exit and succeeds once the engine has it armed;
   * the inner effect then yields the exit code. Armed before start, so an AutoRemove box that
   * exits at once still reports its code.
   */
  readonly containerWait: (id: string) => Effect.Effect<Effect.Effect<number, DockerError>, DockerError>
  readonly containerStart: (id: string) => Effect.Effect<void, DockerError>
  /** Kills a running container; a container already gone is not an error (false). */
  readonly containerKill: (id: string, signal?: string) => Effect.Effect<boolean, DockerError>
  /** Force-removes; a container already gone is not an error. */
  readonly containerRemove: (id: string) => Effect.Effect<void, DockerError>
  /** Containers (running or not) with every label given; `name` narrows to those whose name contains it. */
  readonly containerList: (labels: ReadonlyArray<string>, name?: string) => Effect.Effect<ReadonlyArray<ContainerSummary>, DockerError>
  /** Gives a container a new name (a running one too): its labels cannot change, its name can. */
  readonly containerRename: (id: string, name: string) => Effect.Effect<void, DockerError>
  /** CPU (percent of one core, over the engine's last sample) and memory in use; undefined for a container gone. */
  readonly containerStats: (id: string) => Effect.Effect<ContainerStats | undefined, DockerError>
}

/** One stats sample; a figure the engine did not give (a box stopping, gVisor's fewer counters) is absent. */
export interface ContainerStats {
  readonly cpuPercent: number | undefined
  readonly memoryBytes: number | undefined
}

/** The Docker engine as roster uses it (see {@link DockerApi}): `DockerLive` talks to the real one, `roster/testing` has a fake. */
export class Docker extends Context.Tag("roster/Docker")<Docker, DockerApi>() {}
