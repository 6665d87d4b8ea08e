import { Context, type Effect, type Scope, type Stream } from "effect"
import type { BoxPolicy } from "../config/schema.js"
import type { DockerError, DockerUnavailable } from "../docker/Docker.js"
import type { FoundBox } from "./foundBox.js"
import type { GatewayDown, LockdownError, RuntimeMissing } from "./errors.js"
import type { BoxPlan, BoxRuntime } from "./plan.js"

/** Where a box of a policy runs: its locked network, the gateway's address and port on it, and which credentials the daemon has. */
export interface Isolation {
  readonly network: string
  /** The network's own id: one removed and made again under the same name is another network. */
  readonly networkId: string
  readonly gatewayAddress: string
  readonly gatewayPort: number
  /** The daemon's word on which connections have a credential and from where (undefined from an older daemon). */
  readonly credentials: Readonly<Record<string, string>> | undefined
}

/** What a box writes, stdout and stderr apart; both end when its output does. */
export interface BoxOutput {
  readonly stdout: Stream.Stream<Uint8Array, DockerError>
  readonly stderr: Stream.Stream<Uint8Array, DockerError>
}

/** A box a plan made, held by its opener's scope: its output is read from its first byte, and it starts when told. */
export interface StartedBox extends BoxOutput {
  readonly id: string
  /** Its name (the same for every backend: `roster-box-<run-id>`). */
  readonly name: string
  /** Starts it: called once its output is being read, so nothing it says is lost. */
  readonly start: Effect.Effect<void, DockerError>
  /** Its exit code once it exits (await it as often as needed). */
  readonly exited: Effect.Effect<number, DockerError>
  readonly write: (chunk: string) => Effect.Effect<void, DockerError>
  readonly closeStdin: Effect.Effect<void>
  /** Kills it; a refusal is the caller's to say (a box gone already is no refusal). */
  readonly kill: Effect.Effect<void, DockerError>
}

/** A box found running with no owner (a dead daemon's): its exit, armed, and its output from its start (replayed). */
export interface FoundAgain {
  readonly exited: Effect.Effect<number, DockerError>
  readonly output: Effect.Effect<BoxOutput, DockerError, Scope.Scope>
}

/** A live box's use of the machine: CPU (percent of one core) and memory in use. */
/** A box's CPU and memory now; a figure its engine did not give (a box stopping, gVisor's fewer counters) is absent. */
export interface BoxStats {
  readonly cpuPercent: number | undefined
  readonly memoryBytes: number | undefined
}

/**
 * Where boxes run, in roster's words: a box opened from its plan, the isolation a policy asks
 * for, the runtimes on offer, and this deployment's boxes listed, killed and measured for the
 * supervisor, the gateway and the web. The Docker engine is its one backend today (the Docker
 * service beneath it); Kubernetes pods would be another (docs/SCALE-OUT.md).
 */
export class BoxBackend extends Context.Tag("roster/BoxBackend")<BoxBackend, {
  /** Whether the backend answers: a down engine is said before a run record exists. */
  readonly ping: Effect.Effect<void, DockerUnavailable>
  /** The isolation a box of `policy` runs in, made or checked now (the locked network, the lockdown rules, the gateway on it). */
  readonly isolation: (policy: BoxPolicy) => Effect.Effect<Isolation, LockdownError | GatewayDown | DockerError>
  /** The runtime a box of `policy` runs under on this backend (`[box] runtime`: runsc, runc or auto). */
  readonly runtime: (policy: Pick<BoxPolicy, "runtime">) => Effect.Effect<BoxRuntime, RuntimeMissing | DockerError>
  /** The box `plan` describes, made and attached (not started); killed and removed when the scope closes. */
  readonly open: (plan: BoxPlan) => Effect.Effect<StartedBox, DockerError, Scope.Scope>
  /** A box of this deployment found running (adopted after a restart): its exit armed, its output replayed. */
  readonly findAgain: (id: string) => Effect.Effect<FoundAgain, DockerError>
  /**
   * This deployment's boxes that run or start, read from their names and labels; `runId` narrows to
   * that run's (of any deployment); `ended` adds those that ended and are not yet removed.
   */
  readonly list: (filter?: { readonly runId?: string; readonly ended?: boolean }) => Effect.Effect<ReadonlyArray<FoundBox>, DockerError>
  /** Kills every box of a run (the gateway's stop of a run that failed its preflight or its budget): how many it killed. */
  readonly killRun: (runId: string) => Effect.Effect<number, DockerError>
  /**
   * A running box given to another run: its name becomes `roster-box-<runId>`, which is how every
   * later look (list, killRun, the gateway's) finds it — a warm box taken by a run becomes that run's.
   */
  readonly rename: (box: string, runId: string) => Effect.Effect<void, DockerError>
  /** Kills a box by id or name; one already gone is no error (false). */
  readonly kill: (box: string) => Effect.Effect<boolean, DockerError>
  /** Removes a box by id or name, killed first; one already gone is no error. */
  readonly remove: (box: string) => Effect.Effect<void, DockerError>
  /** The image a name stands for now (its content's id): a box made from an older build under the same name is told apart. Undefined when there is none. */
  readonly imageId: (image: string) => Effect.Effect<string | undefined, DockerError>
  /** A live box's CPU and memory; undefined for one gone. */
  readonly stats: (id: string) => Effect.Effect<BoxStats | undefined, DockerError>
}>() {}
