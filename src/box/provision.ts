import { taintedRunsOf } from "../run/taintedRuns.js"
import { FileSystem, Path } from "@effect/platform"
import { Clock, Duration, Effect, Schema } from "effect"
import * as os from "node:os"
import { Paths, layout } from "../config/Paths.js"
import type { MountRule, Org, WorkerSettings } from "../config/schema.js"
import { ensureBundle } from "../contract/caFiles.js"
import * as C from "../contract/constants.js"
import { currentOwner } from "../contract/owner.js"
import { runFiles } from "../contract/runFiles.js"
import { scopeAdmits, workerSubject } from "../contract/scope.js"
import { copyTree, lchownTree } from "../fs/tree.js"
import { ensureJournal } from "../journal/journal.js"
import { resolveMountedEngine } from "./engine.js"
import { ImageStore } from "./docker/ImageStore.js"
import { BoxBackend } from "../backend/BoxBackend.js"
import { preparePiHome } from "./pihome.js"
import { preflightProbe } from "./preflightProbe.js"
import type { Checkout } from "../knowledge/Checkout.js"
import type { BoxPlan, Engine, HostDirs } from "../backend/plan.js"

/** A box that could not be prepared (folders, channel, ownership), with what failed. */
export class ProvisionError extends Schema.TaggedError<ProvisionError>()("ProvisionError", {
  detail: Schema.String
}) {
  override get message() {
    return `the box could not be prepared: ${this.detail}`
  }
}

const failing = (what: string) => (e: { readonly message: string }) => new ProvisionError({ detail: `${what}: ${e.message}` })

/** The box never runs as root: a root host user gets an unprivileged id that owns the writable mounts. */
export const boxUser = (uid: number, gid: number) =>
  uid === 0 ? { uid: C.BOX_FALLBACK_UID, gid: C.BOX_FALLBACK_UID } : { uid, gid }

export const hostUser = () => boxUser(process.getuid?.() ?? C.BOX_FALLBACK_UID, process.getgid?.() ?? C.BOX_FALLBACK_UID)

/** Hands a tree to the box user without following a link the box may have planted. */
const chownTree = (root: string, uid: number, gid: number) =>
  lchownTree(root, uid, gid).pipe(Effect.mapError(failing(`handing ${root} to the box user`)))

/**
 * The run's folders: the per-run home (workspace, session, agent) and the self view, a
 * per-run dir holding the mountpoints so docker never creates entries in the hand-edited
 * config dir; nested read-only binds supply the live content.
 */
const prepareRunDirs = Effect.fn("provision.runDirs")(function*(worker: string, runDir: string) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const files = layout(yield* Paths)
  const run = runFiles(runDir)
  // inbox: the mountpoint of the run's read-only inbox (docker cannot make one through a read-only bind).
  for (const d of ["workspace", "session", "agent", "inbox"]) yield* fs.makeDirectory(path.join(run.home, d), { recursive: true })
  yield* fs.makeDirectory(path.join(run.inbox, "files"), { recursive: true })
  // The read-only origins of gated repos are not the box user's; a fetch from one starts
  // upload-pack, which reads only config files (not git's variables), so the exception lives here.
  yield* fs.writeFileString(path.join(run.home, ".gitconfig"), "[safe]\n\tdirectory = *\n")
  for (const d of ["config", "journal", "runs"]) yield* fs.makeDirectory(path.join(run.self, d), { recursive: true })
  yield* fs.writeFileString(path.join(run.self, "schedule.json"), "{}\n")
  yield* fs.writeFileString(path.join(run.self, "journal", "journal.jsonl"), "")
  const tasksView = files.tasksView(worker)
  if (!(yield* fs.exists(tasksView))) {
    yield* fs.makeDirectory(path.dirname(tasksView), { recursive: true })
    yield* fs.writeFileString(tasksView, "{}\n")
  }
  const journal = yield* ensureJournal(worker)
  yield* fs.makeDirectory(files.emptyDir, { recursive: true })
  return {
    pihome: run.home,
    inbox: run.inbox,
    selfView: run.self,
    workerConfig: files.workerDir(worker),
    workerRuns: files.workerRunsDir(worker),
    hiddenRuns: yield* taintedRunsOf(worker, path.basename(runDir)),
    emptyDir: files.emptyDir,
    journal,
    tasksView
  }
}, Effect.mapError(failing("preparing the run folders")))

export interface ProvisionRequest {
  readonly worker: string
  readonly runId: string
  readonly runDir: string
  readonly taskId: string | null
  readonly kind: BoxPlan["kind"]
  readonly ceilingMin: number | null
  /** How long its ceiling gives it, from its box's making (the run's prologue decided it). */
  readonly ceiling: Duration.Duration
  /** The run's identity token, minted before the plan is made: the box's proxy credential. */
  readonly token: string
  readonly mode: BoxPlan["mode"]
  readonly org: Org
  readonly settings: WorkerSettings
  readonly mounts: ReadonlyArray<MountRule>
  readonly piArgs: ReadonlyArray<string>
  /** The run's channel (`--channel`): its history read-only at /pihome/channel, and this worker's store in it. */
  readonly channel?: string | null
  /** A continuation: the previous run's pi session folder, copied in as this run's /pihome/session. */
  readonly resumeFrom?: string
  /** A chat session's service: the box gets that service's send tool (and no other). */
  readonly chatSend?: "slack" | "discord" | undefined
  /** A talk session's box: it gets term_send. */
  readonly termSend?: boolean | undefined
}

/**
 * A channel's folder (read-only in the box: its history) with the mountpoint of the worker's
 * channel store already in it, and that store, durable per worker x channel.
 */
const prepareChannel = Effect.fn("provision.channel")(function*(worker: string, channel: string) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const files = layout(yield* Paths)
  const dir = files.channelDir(channel)
  const store = files.channelStoreDir(worker, channel)
  yield* fs.makeDirectory(path.join(dir, "store"), { recursive: true })
  yield* fs.makeDirectory(store, { recursive: true })
  const history = path.join(dir, "history.jsonl")
  if (!(yield* fs.exists(history))) yield* fs.writeFileString(history, "")
  return { name: channel, dir, store }
}, Effect.mapError(failing("preparing the channel")))

/**
 * The box's whole plan, its token given (everything but the container): the lockdown, the image and the CA
 * bundle (independent, so checked at once), the engine, the per-run home with sentinel
 * logins and the self view, all handed to the box user.
 */
export const provisionBox = Effect.fn("provision.box")(function*(req: ProvisionRequest, store: string, checkouts: ReadonlyArray<Checkout>) {
  const paths = yield* Paths
  const backend = yield* BoxBackend
  const files = layout(paths)
  const { org, worker } = req
  const [lockdown, , caBundle, runtime] = yield* Effect.all([
    backend.isolation(org.box),
    Effect.flatMap(ImageStore, (images) => images.ensure(org.engine.image)),
    // Fails with CaMissing (start the gateway) when there is no CA to bundle.
    ensureBundle(),
    backend.runtime(org.box)
  ], { concurrency: "unbounded" })
  const engine: Engine = org.engine.dir ? yield* resolveMountedEngine(org.engine.dir) : { kind: "baked" }
  const dirs = yield* prepareRunDirs(worker, req.runDir)
  if (req.resumeFrom) {
    // The box wrote that folder: copied without following a link it may have planted.
    yield* copyTree(req.resumeFrom, (yield* Path.Path).join(dirs.pihome, "session")).pipe(Effect.mapError(failing("copying the session to continue")))
  }
  const piHome = yield* preparePiHome((yield* Path.Path).join(dirs.pihome, "agent"), req.settings, lockdown.credentials)
  const channel = req.channel ? yield* prepareChannel(worker, req.channel) : null
  const user = hostUser()
  const owner = yield* currentOwner
  if (user.uid !== process.getuid?.()) {
    yield* chownTree(dirs.pihome, user.uid, user.gid)
    yield* chownTree(store, user.uid, user.gid)
    if (channel) yield* chownTree(channel.store, user.uid, user.gid)
  }
  const hostDirs: HostDirs = { ...dirs, store, ca: files.caCert, caBundle }
  return {
    runId: req.runId,
    worker,
    kind: req.kind,
    taskId: req.taskId,
    image: org.engine.image,
    runtime,
    policy: org.box,
    user,
    preflightProbe: preflightProbe(org.box.preflight_probe, os.networkInterfaces()).probe,
    network: lockdown.network,
    networkId: lockdown.networkId,
    gatewayAddress: lockdown.gatewayAddress,
    gatewayPort: lockdown.gatewayPort,
    token: req.token,
    dirs: hostDirs,
    mounts: req.mounts,
    checkouts,
    channel,
    exposedEnv: org.expose.filter((e) => scopeAdmits(e.scope, workerSubject(worker))).map((e) => e.env),
    anthropicEnvKey: piHome.anthropicEnvKey,
    ceilingMin: req.ceilingMin,
    deployment: paths.config,
    // The one read of the clock for the ceiling: after provisioning (an image pull counts against no
    // run), just before the box is made — the label the reaper goes by and the runner's timer agree.
    deadline: (yield* Clock.currentTimeMillis) + Duration.toMillis(req.ceiling),
    owner,
    hostCpus: os.availableParallelism(),
    engine,
    mode: req.mode,
    piArgs: req.piArgs,
    chatSend: req.chatSend ?? null,
    termSend: req.termSend ?? false
  } satisfies BoxPlan
})
