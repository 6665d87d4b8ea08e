import type { BoxPolicy, MountRule } from "../config/schema.js"
import type { Owner } from "../contract/owner.js"
import type { Checkout } from "../knowledge/Checkout.js"

/** The OCI runtime a box runs under: gVisor's user-space kernel, or the host's kernel. */
export type BoxRuntime = "runsc" | "runc"

export type Engine =
  | { readonly kind: "baked" }
  | {
    readonly kind: "mounted"
    /** The checkout on the host, mounted read-only at MOUNTED_ENGINE. */
    readonly hostDir: string
    /** Container paths (under MOUNTED_ENGINE) of pi's JS entry and each box extension. */
    readonly entry: string
    readonly extensions: ReadonlyArray<string>
  }

export interface HostDirs {
  readonly pihome: string
  /** The run's inbox (files people sent it), read-only at /pihome/inbox. */
  readonly inbox: string
  readonly store: string
  readonly selfView: string
  readonly workerConfig: string
  readonly workerRuns: string
  /** The worker's tainted runs whose folders the box does not see (an empty folder mounted over each), and that folder. */
  readonly hiddenRuns: ReadonlyArray<string>
  readonly emptyDir: string
  readonly journal: string | undefined
  readonly tasksView: string
  readonly ca: string
  readonly caBundle: string
}

/** Everything that decides a box's container spec: image, policy, user, network, token, mounts, environment, engine. */
export interface BoxPlan {
  readonly runId: string
  readonly worker: string
  /** "warm": a box made ready for its worker's next run, no run has claimed yet (labelled so; its claim cannot relabel it). */
  readonly kind: "box" | "task" | "session" | "warm"
  readonly taskId: string | null
  readonly image: string
  /** The OCI runtime the engine starts it under (resolved from `[box] runtime`). */
  readonly runtime: BoxRuntime
  readonly policy: BoxPolicy
  readonly user: { readonly uid: number; readonly gid: number }
  /** Where the box's preflight tries to connect directly (and must fail): org.toml's, or the one roster picked for this machine. */
  readonly preflightProbe?: string
  /** The deployment's locked network. */
  readonly network: string
  /** Its id when the box was planned (a warm box's claim checks it is still the network there is). */
  readonly networkId?: string
  readonly gatewayAddress: string
  readonly gatewayPort: number
  readonly token: string
  readonly dirs: HostDirs
  readonly mounts: ReadonlyArray<MountRule>
  /** The run's gated repos: each a per-run clone with the canonical repo as a read-only origin. */
  readonly checkouts: ReadonlyArray<Checkout>
  /** The run's channel: its folder (read-only history) and this worker's store in it. */
  readonly channel: { readonly name: string; readonly dir: string; readonly store: string } | null
  /** [[expose]] variables whose scope matches this worker. */
  readonly exposedEnv: ReadonlyArray<string>
  readonly anthropicEnvKey: boolean
  readonly ceilingMin: number | null
  /** The deployment's config root and the ceiling's end (ms since the epoch), put on the box as labels. */
  readonly deployment: string
  readonly deadline: number
  /** The process the box must not outlive: the daemon's reaper kills a box whose owner is gone. */
  readonly owner: Owner
  /** The host's cores: a box gets half unless `[box] cpus` says otherwise. */
  readonly hostCpus: number
  readonly engine: Engine
  readonly mode: "json" | "rpc"
  /** pi's arguments after the mode and session dir (session id, system prompt, prompt). */
  readonly piArgs: ReadonlyArray<string>
  /** A chat session's service: its send tool is registered in the box (slack_send or discord_send). */
  readonly chatSend: "slack" | "discord" | null
  /** A talk session's box (roster talk, the web's Talk): it gets term_send, to speak to its person between turns. */
  readonly termSend: boolean
}


export const containerName = (runId: string) => `roster-box-${runId}`
