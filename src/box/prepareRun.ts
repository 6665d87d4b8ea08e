import { taintedRunsOf } from "../run/taintedRuns.js"
import { type Duration, Effect } from "effect"
import { validateChannelName, validateWorkerName } from "../config/names.js"
import { OrgConfig } from "../config/OrgConfig.js"
import { type MountRule, mountsFor, type Org, type WorkerSettings } from "../config/schema.js"
import { BoxBackend } from "../backend/BoxBackend.js"
import { newRunId } from "../run/runId.js"
import { BadIdentity, readIdentity, readWorkerSettings } from "../worker/workers.js"
import { identityProblem } from "../worker/identityCheck.js"
import { layout, Paths } from "../config/Paths.js"
import { ceilingDuration, validateCeiling } from "./ceiling.js"

/** A run's own limits over `[box]`'s: a one-shot's `--ceiling`, a chat channel's idle timeout and session ceiling. */
export interface RunLimits {
  readonly ceilingMin?: number | undefined
  readonly idleSecs?: number | undefined
  readonly sessionCeilingMin?: number | undefined
}

/** What a run asks for before anything of it exists. */
export interface PrepareRequest {
  readonly worker: string
  readonly channel?: string | null | undefined
  /** The run id when the caller recorded it already (a task's claim). */
  readonly runId?: string | undefined
  readonly limits?: RunLimits | undefined
  /** Which ceiling bounds it: a one-shot's (`[box] ceiling_min`) or a session's (`session_ceiling_min`). */
  readonly kind: "one-shot" | "session"
}

/** A run checked and planned, from one org snapshot: nothing written yet, no box, no token. */
export interface PreparedRun {
  readonly runId: string
  readonly worker: string
  readonly channel: string | null
  /** The snapshot the whole run works from, its own limits applied to `[box]`. */
  readonly org: Org
  readonly settings: WorkerSettings
  readonly mounts: ReadonlyArray<MountRule>
  /** How long its ceiling gives it (a one-shot's `[box] ceiling_min`, a session's `session_ceiling_min`), counted from its box's making. */
  readonly ceiling: Duration.Duration
  /** The worker's identity.md as read for this run (the head of its system prompt). */
  readonly identity: string
  /** Its whole system prompt, when a warm box was checked against it (the box's own): compiled at its start otherwise. */
  readonly system?: string
  /** The worker's tainted runs whose folders its box is not shown (taintedRuns.ts). */
  readonly hidden: ReadonlyArray<string>
}

const withLimits = (org: Org, limits: RunLimits): Org => ({
  ...org,
  box: {
    ...org.box,
    ceiling_min: limits.ceilingMin ?? org.box.ceiling_min,
    idle_secs: limits.idleSecs ?? org.box.idle_secs,
    session_ceiling_min: limits.sessionCeilingMin ?? org.box.session_ceiling_min
  }
})

/**
 * The one prologue of every run — one-shot, task and session — before its record exists: the
 * names and limits checked, the worker's identity read, the engine asked (a down engine is said
 * as that, before a run record exists for a run that never could start), and the org, the
 * worker's settings and its mounts read once, from one snapshot.
 */
export const prepareRun = Effect.fn("run.prepare")(function*(req: PrepareRequest) {
  yield* validateWorkerName(req.worker)
  const limits = req.limits ?? {}
  if (limits.ceilingMin !== undefined) yield* validateCeiling(limits.ceilingMin)
  if (limits.sessionCeilingMin !== undefined) yield* validateCeiling(limits.sessionCeilingMin)
  const channel = req.channel ?? null
  if (channel !== null) yield* validateChannelName(channel)
  // At once: the engine's ping is a wait on a socket, org.toml's first decode is CPU (measured,
  // ~40 and ~60 ms). A failure is said in this order, as if they had run one after another.
  const [identity, ping, snapshot, read] = yield* Effect.all([
    readIdentity(req.worker), (yield* BoxBackend).ping, (yield* OrgConfig).snapshot, readWorkerSettings(req.worker)
  ], { concurrency: "unbounded", mode: "either" })
  const identityText = yield* identity
  yield* ping
  const org = withLimits(yield* snapshot, limits)
  // A hand-edited identity is checked before anything of the run exists, as `worker edit` checks it.
  const bad = identityProblem(identityText, org.box.identity_max)
  if (bad) return yield* Effect.fail(new BadIdentity({ worker: req.worker, file: layout(yield* Paths).identityMd(req.worker), detail: bad }))
  const settings = yield* read
  const ceiling = ceilingDuration(req.kind === "session" ? org.box.session_ceiling_min : org.box.ceiling_min)
  const runId = req.runId ?? (yield* newRunId)
  return {
    runId,
    hidden: yield* taintedRunsOf(req.worker, runId),
    worker: req.worker,
    channel,
    org,
    settings,
    mounts: mountsFor(org, req.worker),
    ceiling,
    identity: identityText
  } satisfies PreparedRun
})
