import { FileSystem } from "@effect/platform"
import { Effect } from "effect"
import { validateWorkerName } from "../config/names.js"
import { Paths, layout } from "../config/Paths.js"
import { orgTemplate } from "../config/template.js"
import { writeAtomic } from "../fs/atomic.js"
import { ensureCa } from "../gateway/certs/ca.js"
import { addWorker } from "../worker/workers.js"

/** How {@link initDeployment} makes a deployment: the first worker, and org.toml if not the template. */
export interface InitOptions {
  /** The first worker (default "alice"); null for none. */
  readonly worker?: string | null
  /** org.toml to write instead of the commented template (an embedder's or a test's own). */
  readonly orgToml?: string
}

/** What `initDeployment` made and what it found already there. */
export interface InitResult {
  readonly orgToml: { readonly file: string; readonly created: boolean; readonly lockdown: boolean }
  readonly worker: { readonly name: string; readonly identity: string; readonly created: boolean } | null
  readonly caCert: string
}

/**
 * A deployment on disk, the way `roster init` makes one: the config, data and state folders
 * (the vault 0700), org.toml with safe defaults, a first worker and the deployment's CA. Never
 * overwrites: what exists is kept and said so.
 */
export const initDeployment = Effect.fn("deployment.init")(function*(options: InitOptions = {}) {
  const worker = options.worker === undefined ? "alice" : options.worker
  if (worker !== null) yield* validateWorkerName(worker)
  const fs = yield* FileSystem.FileSystem
  const paths = yield* Paths
  const files = layout(paths)
  for (const dir of [paths.config, paths.data, paths.state]) yield* fs.makeDirectory(dir, { recursive: true })
  yield* fs.makeDirectory(files.vaultDir, { recursive: true, mode: 0o700 })
  yield* fs.chmod(files.vaultDir, 0o700)
  const hadOrg = yield* fs.exists(files.orgToml)
  // Only root can install the iptables pinning; as root it is on from the start.
  const lockdown = options.orgToml === undefined && process.getuid?.() === 0
  if (!hadOrg) yield* writeAtomic(files.orgToml, options.orgToml ?? orgTemplate({ root: lockdown }))
  let made: InitResult["worker"] = null
  if (worker !== null) {
    const had = yield* fs.exists(files.identityMd(worker))
    if (!had) yield* addWorker(worker)
    made = { name: worker, identity: files.identityMd(worker), created: !had }
  }
  yield* ensureCa()
  return {
    orgToml: { file: files.orgToml, created: !hadOrg, lockdown: !hadOrg && lockdown },
    worker: made,
    caCert: files.caCert
  } satisfies InitResult
})
