import { Schema } from "effect"
import * as path from "node:path"
import { MNT } from "../contract/constants.js"

/**
 * One gated repo of one run, as the host recorded it at provisioning (in a host-only file beside
 * the clone, never mounted): where the canonical repo, the box's clone and the host's own git dir
 * are, and what the run started from.
 */
export const Checkout = Schema.Struct({
  connection: Schema.String,
  /** The canonical repository on the host (the mount's path). */
  canonical: Schema.String,
  canonical_git_dir: Schema.String,
  /** The run's clone on the host (box-owned; mounted at /pihome/mnt/<connection>). */
  clone: Schema.String,
  /** The host's own bare git dir for this checkout: roster's config only, the canonical objects as an alternate. */
  scratch: Schema.String,
  default_branch: Schema.String,
  base: Schema.String,
  branch: Schema.String,
  mode: Schema.Literal("rw", "ro"),
  protect: Schema.Array(Schema.String),
  push_max: Schema.Number
})
export type Checkout = typeof Checkout.Type

export const Checkouts = Schema.parseJson(Schema.Array(Checkout))

export const branchFor = (worker: string, runId: string) => `roster/${worker}/${runId}`
export const quarantineRef = (runId: string) => `refs/quarantine/run-${runId}`
export const boxDir = (connection: string) => `${MNT}/${connection}`
export const originDir = (connection: string) => `${MNT}/.origins/${connection}`

/** The host-only half of a run's repos folder: roster's git dirs and the checkouts file. */
export const hostSide = (reposDir: string) => ({
  dir: path.join(reposDir, ".host"),
  checkouts: path.join(reposDir, ".host", "checkouts.json"),
  scratch: (connection: string) => path.join(reposDir, ".host", `${connection}.git`)
})

/** ROSTER_REPOS_JSON: every checkout of the run, as the box sees it. */
export const reposJson = (checkouts: ReadonlyArray<Checkout>) =>
  JSON.stringify(checkouts.map((c) => ({ connection: c.connection, dir: boxDir(c.connection), base: c.base, branch: c.branch, mode: c.mode })))

/** The box's variables for its gated repos, by name; ROSTER_KNOWLEDGE_* names the one called "knowledge". */
export const knowledgeVars = (checkouts: ReadonlyArray<Checkout>): Record<string, string> => {
  if (checkouts.length === 0) return {}
  const k = checkouts.find((c) => c.connection === "knowledge")
  return {
    ROSTER_REPOS_JSON: reposJson(checkouts),
    ...(k
      ? { ROSTER_KNOWLEDGE_DIR: boxDir(k.connection), ROSTER_KNOWLEDGE_BASE: k.base, ROSTER_KNOWLEDGE_MODE: k.mode, ROSTER_KNOWLEDGE_BRANCH: k.branch }
      : {})
  }
}

/** The box's environment for its gated repos, as `NAME=value` lines. */
export const knowledgeEnv = (checkouts: ReadonlyArray<Checkout>): Array<string> =>
  Object.entries(knowledgeVars(checkouts)).map(([name, value]) => `${name}=${value}`)

/** A path the push changes falls under a protected one (the path itself, or a folder and all below it). */
export const protectedHits = (changed: ReadonlyArray<string>, protect: ReadonlyArray<string>) => {
  const rules = protect.map((p) => p.replace(/^\.\/+/, "").replace(/\/+$/, "")).filter((p) => p !== "")
  return changed.filter((c) => rules.some((r) => c === r || c.startsWith(`${r}/`)))
}

