import { FileSystem, Path } from "@effect/platform"
import { Effect, Schema } from "effect"
import * as fsp from "node:fs/promises"
import * as nodePath from "node:path"
import { Paths, layout } from "../config/Paths.js"
import { mountsFor, type Org, type WorkerSettings } from "../config/schema.js"
import { ensureBundle, CaMissing } from "../gateway/ca.js"
import * as C from "./constants.js"
import { mintIdentity } from "./identity.js"
import { ImageStore } from "./ImageStore.js"
import { ensureLockdown } from "./lockdown.js"
import { preparePiHome } from "./pihome.js"
import type { BoxPlan, Engine } from "./spec.js"
import { scopeAdmits } from "./spec.js"
import { provisionStore } from "./store.js"

export class EngineError extends Schema.TaggedError<EngineError>()("EngineError", {
  dir: Schema.String,
  detail: Schema.String
}) {
  override get message() {
    return `[engine] dir = "${this.dir}" cannot be used: ${this.detail} (run npm ci in that checkout, or remove [engine] dir to use the image's engine)`
  }
}

export class ProvisionError extends Schema.TaggedError<ProvisionError>()("ProvisionError", {
  detail: Schema.String
}) {
  override get message() {
    return `the box could not be prepared: ${this.detail}`
  }
}

const io = <A>(what: string, f: () => Promise<A>) =>
  Effect.tryPromise({ try: f, catch: (e) => new ProvisionError({ detail: `${what}: ${e instanceof Error ? e.message : String(e)}` }) })

/** The box never runs as root: a root host user gets an unprivileged id that owns the writable mounts. */
export const boxUser = (uid: number, gid: number) =>
  uid === 0 ? { uid: C.BOX_FALLBACK_UID, gid: C.BOX_FALLBACK_UID } : { uid, gid }

const hostUser = () => boxUser(process.getuid?.() ?? C.BOX_FALLBACK_UID, process.getgid?.() ?? C.BOX_FALLBACK_UID)

const chownTree = (root: string, uid: number, gid: number) =>
  io(`handing ${root} to the box user`, async () => {
    const walk = async (p: string): Promise<void> => {
      await fsp.lchown(p, uid, gid)
      const st = await fsp.lstat(p)
      if (st.isDirectory()) for (const e of await fsp.readdir(p)) await walk(nodePath.join(p, e))
    }
    await walk(root)
  })

/**
 * A dev checkout mounted read-only instead of the baked engine: pi's real JS entry from its
 * package.json `bin` (the npm shim is a shell script) and every box/extensions/*.ts, sorted.
 */
export const resolveMountedEngine = Effect.fn("provision.resolveMountedEngine")(function*(dir: string) {
  const root = yield* io("reading the checkout", () => fsp.realpath(dir)).pipe(
    Effect.mapError((e) => new EngineError({ dir, detail: e.detail }))
  )
  const inBox = (p: string) => `${C.MOUNTED_ENGINE}/${nodePath.relative(root, p).split(nodePath.sep).join("/")}`
  const resolved = yield* io("resolving pi", async () => {
    // pi installed in the checkout itself, or in its box/engine (npm ci --prefix box/engine).
    const candidates = ["node_modules", "box/engine/node_modules"].map((d) => nodePath.join(root, d, "@earendil-works/pi-coding-agent"))
    const found = await Promise.all(candidates.map((c) => fsp.realpath(c).catch(() => undefined)))
    const pkgDir = found.find((f) => f !== undefined)
    if (!pkgDir) throw new Error("pi is not installed there (npm ci --prefix box/engine)")
    const pkg = JSON.parse(await fsp.readFile(nodePath.join(pkgDir, "package.json"), "utf8")) as { bin?: string | Record<string, string> }
    const bin = typeof pkg.bin === "string" ? pkg.bin : pkg.bin?.pi
    if (!bin) throw new Error("pi's package.json has no bin")
    const entry = nodePath.join(pkgDir, bin)
    if (!entry.startsWith(`${root}${nodePath.sep}`)) throw new Error(`pi resolves outside the checkout (${entry})`)
    const extDir = nodePath.join(root, "box/extensions")
    const exts = (await fsp.readdir(extDir).catch(() => [] as Array<string>)).filter((f) => f.endsWith(".ts")).sort()
    return { entry, extensions: exts.map((f) => nodePath.join(extDir, f)) }
  }).pipe(Effect.mapError((e) => new EngineError({ dir, detail: e.detail })))
  return {
    kind: "mounted",
    hostDir: root,
    entry: inBox(resolved.entry),
    extensions: resolved.extensions.map(inBox)
  } satisfies Engine
})

export interface ProvisionRequest {
  readonly worker: string
  readonly runId: string
  readonly taskId: string | null
  readonly kind: BoxPlan["kind"]
  readonly ceilingMin: number | null
  readonly mode: BoxPlan["mode"]
  readonly org: Org
  readonly settings: WorkerSettings
}

/**
 * Everything a box needs up to its pi command: the lockdown, the image, the per-run home with
 * sentinel logins, the store, the self view and a minted identity token (held by the scope).
 */
export const provisionBox = Effect.fn("provision.box")(function*(req: ProvisionRequest) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const files = layout(yield* Paths)
  const { org, worker, runId } = req

  const lockdown = yield* ensureLockdown(org.box)
  yield* (yield* ImageStore).ensure(org.engine.image)
  if (!(yield* fs.exists(files.caCert))) return yield* Effect.fail(new CaMissing({ file: files.caCert }))
  const caBundle = yield* ensureBundle()
  const engine: Engine = org.engine.dir ? yield* resolveMountedEngine(org.engine.dir) : { kind: "baked" }

  const runDir = files.runDir(worker, runId)
  const pihome = path.join(runDir, "home")
  for (const d of ["workspace", "session", "agent"]) yield* fs.makeDirectory(path.join(pihome, d), { recursive: true })
  const store = yield* provisionStore(worker)
  const piHome = yield* preparePiHome(path.join(pihome, "agent"), req.settings)

  // The self view: a per-run dir holding the mountpoints, so docker never creates entries in
  // the hand-edited config dir; nested read-only binds supply the live content.
  const selfView = path.join(runDir, "self")
  for (const d of ["config", "journal", "runs"]) yield* fs.makeDirectory(path.join(selfView, d), { recursive: true })
  yield* fs.writeFileString(path.join(selfView, "schedule.json"), "{}\n")
  yield* fs.writeFileString(path.join(selfView, "journal", "journal.jsonl"), "")
  const tasksView = files.tasksView(worker)
  if (!(yield* fs.exists(tasksView))) {
    yield* fs.makeDirectory(path.dirname(tasksView), { recursive: true })
    yield* fs.writeFileString(tasksView, "{}\n")
  }
  const journal = files.journalFile(worker)

  const user = hostUser()
  if (user.uid !== process.getuid?.()) {
    yield* chownTree(pihome, user.uid, user.gid)
    yield* chownTree(store, user.uid, user.gid)
  }

  const identity = yield* mintIdentity(worker, runId, req.taskId)
  const subject = `org/${worker}`
  const plan: Omit<BoxPlan, "piArgs"> = {
    runId,
    worker,
    kind: req.kind,
    taskId: req.taskId,
    image: org.engine.image,
    policy: org.box,
    user,
    gatewayAddress: lockdown.gatewayAddress,
    gatewayPort: lockdown.gatewayPort,
    token: identity.token,
    dirs: {
      pihome,
      store,
      selfView,
      workerConfig: files.workerDir(worker),
      workerRuns: files.workerRunsDir(worker),
      journal: (yield* fs.exists(journal)) ? journal : undefined,
      tasksView,
      ca: files.caCert,
      caBundle
    },
    mounts: mountsFor(org, worker),
    exposedEnv: org.expose.filter((e) => scopeAdmits(e.scope, subject)).map((e) => e.env),
    envKeyOnly: piHome.envKeyOnly,
    ceilingMin: req.ceilingMin,
    engine,
    mode: req.mode
  }
  return { plan, runDir, identity }
})
