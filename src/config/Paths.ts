import { FileSystem, Path } from "@effect/platform"
import { Context, Effect, Layer } from "effect"
import * as os from "node:os"
import * as path from "node:path"
import { type FleetPlace, fleetPlaceOf } from "./fleetPaths.js"

/** What a service reads its files through: the deployment's roots and the file system. */
export type HostFiles = Paths | FileSystem.FileSystem | Path.Path

/** The three roots roster keeps its files under, plus the host user's home (for ~/.pi). */
export interface RosterPaths {
  readonly config: string
  readonly data: string
  readonly state: string
  readonly home: string
  /**
   * Under `[cluster]`: this machine's node, and the folder every node mounts, which holds what
   * workers carry between nodes (run folders, contexts, stores, repos, channels) and each node's
   * audit log. The rest stays this machine's own (the vault, tokens, the CA).
   */
  readonly fleet?: FleetPlace | undefined
}

/** The deployment's config, data and state roots (`ROSTER_HOME`, or the XDG folders), as a service. */
export class Paths extends Context.Tag("roster/Paths")<Paths, RosterPaths>() {
  /** `ROSTER_HOME=/x` puts everything under /x/{config,data,state}; otherwise XDG. */
  static fromEnv(env: NodeJS.ProcessEnv = process.env): RosterPaths {
    const home = env.HOME && env.HOME.length > 0 ? env.HOME : os.homedir()
    const rosterHome = env.ROSTER_HOME
    if (rosterHome && rosterHome.length > 0) {
      const root = path.resolve(rosterHome)
      const config = path.join(root, "config")
      return { config, data: path.join(root, "data"), state: path.join(root, "state"), home, fleet: fleetPlaceOf(config, env) }
    }
    const xdg = (name: string, fallback: string) => {
      const value = env[name]
      return value && path.isAbsolute(value) ? value : path.join(home, fallback)
    }
    const config = path.join(xdg("XDG_CONFIG_HOME", ".config"), "roster")
    return {
      config,
      data: path.join(xdg("XDG_DATA_HOME", ".local/share"), "roster"),
      state: path.join(xdg("XDG_STATE_HOME", ".local/state"), "roster"),
      home,
      fleet: fleetPlaceOf(config, env)
    }
  }

  static readonly layer = Layer.sync(Paths, () => Paths.fromEnv())
  static readonly layerAt = (paths: RosterPaths) => Layer.succeed(Paths, paths)
}

/**
 * Where each file lives; pure so both the CLI and the gateway agree without a service call.
 * Made once per roots object: the gateway asks it on every request (its audit line), and building
 * it is some forty path joins (measured: ~2 % of the gateway's CPU under load).
 */
export const layout = (p: RosterPaths): Layout => {
  const known = layouts.get(p)
  if (known) return known
  const made = makeLayout(p)
  layouts.set(p, made)
  return made
}

const layouts = new WeakMap<RosterPaths, ReturnType<typeof makeLayout>>()

const makeLayout = (p: RosterPaths) => {
  // What a worker carries between a fleet's nodes is in the shared folder; one machine keeps it in data.
  const carried = p.fleet?.shared ?? p.data
  return {
    orgToml: path.join(p.config, "org.toml"),
    workersDir: path.join(p.config, "workers"),
    workerDir: (worker: string) => path.join(p.config, "workers", worker),
    identityMd: (worker: string) => path.join(p.config, "workers", worker, "identity.md"),
    workerToml: (worker: string) => path.join(p.config, "workers", worker, "worker.toml"),
    runsDir: path.join(carried, "runs"),
    workerRunsDir: (worker: string) => path.join(carried, "runs", worker),
    /**
     * One empty file per run of the worker that is tainted and not cleared (beside the runs, never in a
     * mounted folder): those runs' folders are hidden from the worker's other runs (/pihome/self/runs).
     */
    taintedRunsDir: (worker: string) => path.join(carried, "runs", ".tainted", worker),
    /** An empty folder, mounted read-only over each hidden run's folder. */
    emptyDir: path.join(p.state, "empty"),
    runDir: (worker: string, runId: string) => path.join(carried, "runs", worker, runId),
    storeDir: (worker: string) => path.join(carried, "stores", worker),
    snapshotsDir: (worker: string) => path.join(carried, "stores", ".snapshots", worker),
    /** Per-run clones of gated repos (box-owned) and the host's own git dirs beside them (never mounted). */
    runReposDir: (worker: string, runId: string) => path.join(carried, "repos", worker, runId),
    /** A channel's folder, mounted read-only at /pihome/channel: its recent messages, written by roster. */
    channelDir: (channel: string) => path.join(carried, "channels", channel),
    /**
     * Runs whose words reached a channel but not its history (its line could not be written): beside the
     * channel folders, never mounted. The channel's next runs take those runs' taint as the history's.
     */
    channelUnrecordedFile: (channel: string) => path.join(carried, "channels", ".unrecorded", `${channel}.json`),
    /** The durable store of one worker in one channel, mounted at /pihome/channel/store. */
    channelStoreDir: (worker: string, channel: string) => path.join(carried, "stores", ".channels", worker, channel),
    /**
     * The tainted runs that changed a store, host-side beside the stores (never mounted): a run given the
     * store starts tainted while one of them is. The worker's store's, and one worker's store in a channel.
     */
    storeMarks: (worker: string) => path.join(carried, "stores", ".marks", `${worker}.json`),
    channelStoreMarks: (worker: string, channel: string) => path.join(carried, "stores", ".marks", ".channels", worker, `${channel}.json`),
    /** A chat channel's messages waiting for its next session (this machine's listener's): kept across a restart. */
    chatWaitingFile: (channel: string) => path.join(p.data, "chat", "waiting", `${channel}.json`),
    journalFile: (worker: string) => path.join(p.data, "journal", `${worker}.jsonl`),
    /** A run's context (surface, origin, reply_to, continuation, memory briefed): host-side, never beside run.json (the box sees that folder). */
    contextFile: (worker: string, runId: string) => path.join(carried, "contexts", worker, `${runId}.json`),
    /** A worker's memory (remember / forget through the gateway): host-side, never mounted. */
    memoryFile: (worker: string) => path.join(p.data, "memory", `${worker}.jsonl`),
    /**
     * Messages for a live warm session from outside it (a task's reply_to talk:<run-id>): host-side.
     * The file this process appends to: a fleet node its own (<run-id>.<node>.jsonl), since two
     * machines appending to one file over NFS can interleave or lose lines; the session reads them all.
     */
    inboxFile: (runId: string) => path.join(carried, "inbox", p.fleet ? `${runId}.${p.fleet.node}.jsonl` : `${runId}.jsonl`),
    inboxDir: path.join(carried, "inbox"),
    tasksDir: path.join(p.data, "tasks", "records"),
    taskFile: (taskId: string) => path.join(p.data, "tasks", "records", `${taskId}.json`),
    /** Task records roster could not read, put aside as they were (each listed as a failed task). */
    tasksUnreadableDir: path.join(p.data, "tasks", "unreadable"),
    /** Finished tasks past [supervisor] keep_days, out of the live list: `<month>/<id>.json`, read by task show and task list --all. */
    tasksArchiveDir: path.join(p.data, "tasks", "archive"),
    /** The worker's queue as its boxes see it (/pihome/self/schedule.json), rewritten in place. */
    tasksView: (worker: string) => path.join(p.data, "tasks", "views", `${worker}.json`),
    vaultDir: path.join(p.data, "vault"),
    /** Which process is the deployment's daemon: taken first at start, so a second daemon changes nothing. */
    daemonLock: path.join(p.state, "daemon.lock"),
    /** Left by `roster server stop --fail-running` for the daemon it stops: this stop fails its running tasks. */
    stopFailsRunning: path.join(p.state, "stop-fails-running"),
    gatewayJson: path.join(p.state, "gateway.json"),
    gatewayLog: path.join(p.state, "gateway.log"),
    /** The daemon's control API (HTTP on a unix socket, 0600): the CLI and the dashboard talk to it. */
    controlSocket: path.join(p.state, "control.sock"),
    caDir: path.join(p.state, "ca"),
    caCert: path.join(p.state, "ca", "ca.crt"),
    caKey: path.join(p.state, "ca", "ca.key"),
    caBundle: path.join(p.state, "ca", "ca-bundle.crt"),
    identityDir: path.join(p.state, "identity"),
    imagePulls: path.join(p.state, "image-pulls.json"),
    /** When the open-host warning was last shown (once a day per deployment). */
    openHostWarned: path.join(p.state, "open-host-warned"),
    /** When the note that boxes run under runc (gVisor not registered) was last shown (once a day). */
    runtimeNoted: path.join(p.state, "runtime-noted"),
    /** The gateway's audit log: this machine's, or under `[cluster]` this node's folder of the shared one (runs show reads any node's). */
    auditDir: p.fleet ? path.join(p.fleet.shared, "audit", p.fleet.node) : path.join(p.state, "audit"),
    /** A node's audit log in a fleet (its own: auditDir). */
    nodeAuditDir: (node: string) => (p.fleet ? path.join(p.fleet.shared, "audit", node) : path.join(p.state, "audit")),
    /** The web UI's login token (0600), printed by `roster web`. */
    webToken: path.join(p.state, "web-token"),
    /** What model answers cost, one line each, per UTC day: the budgets' ledger. */
    ledgerDir: path.join(p.state, "ledger"),
    hostPiAuth: path.join(p.home, ".pi", "agent", "auth.json"),
    hostPiSettings: path.join(p.home, ".pi", "agent", "settings.json")
  }
}

export type Layout = ReturnType<typeof makeLayout>

export const Layout = Effect.map(Paths, layout)

