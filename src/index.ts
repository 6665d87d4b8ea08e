/**
 * roster as a library: run a worker (the pi coding agent) in a locked-down box from another
 * Effect program — one-shot runs, warm sessions, the task queue — with the same services the
 * `roster` CLI uses. Provide {@link RosterLive} (or `RosterTest` from `roster/testing`) once at
 * your program's edge; {@link makeRosterLive} swaps any one part (an engine, a deployment's
 * paths, a Reporter, a task store) everywhere, since each service captures the parts below it
 * when it is built.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Deployment, RosterLive, Runner } from "roster"
 *
 * const program = Effect.gen(function*() {
 *   yield* Deployment.init({ worker: "alice" })
 *   const runner = yield* Runner
 *   return yield* runner.once({ worker: "alice", prompt: "summarise the notes in your store", ceilingMin: 10 })
 * })
 * Effect.runPromise(program.pipe(Effect.provide(RosterLive)))
 * ```
 * @module
 */
import { initDeployment } from "./deployment/init.js"

// The runs.
export { runOnce, cliExitCode, BlankPrompt, type RunOutcome, type RunRequest } from "./box/runOnce.js"
export { runSession, type SessionEndReason, type SessionOutcome, type SessionRequest } from "./session/runSession.js"
export { type SessionMessage, UnpreparableMessage } from "./session/turnContext.js"
export { containerSpec } from "./box/docker/spec.js"
export type { BoxPlan } from "./backend/plan.js"

// The task queue, the supervisor and the daemon.
export { queueTask, PERSON, type TaskRequest } from "./supervisor/queueTask.js"
export { Supervisor, type SupervisorApi, type TaskFilter } from "./supervisor/Supervisor.js"
export { type DirectView, type RunEnv, type RunError, Runner, type SessionError } from "./runner/Runner.js"
export { restoreStore, StoreRefused, sweepStores } from "./supervisor/storeCare.js"
export { TaskStore, type NewTask, type TaskStoreEnv } from "./task/TaskStore.js"
export { MemoryStore, type MemoryEntry, type MemoryEnv, MemoryError, MemoryRefused, type MemoryScope } from "./memory/MemoryStore.js"
export { NoSuchTask, type TaskOrigin, TaskRecord, TaskRefused, TaskStatus, TaskStoreError } from "./task/TaskRecord.js"
export { ControlApi } from "./api/ControlApi.js"
export { runDaemon } from "./daemon/daemon.js"
export { GatewayLive, type GatewayOptions, serveGateway } from "./gateway/server.js"
export { Gateway, type GatewayState } from "./gateway/egress/Gateway.js"

// A deployment and its files.
export { initDeployment, type InitOptions, type InitResult } from "./deployment/init.js"
export { Paths, type HostFiles, type RosterPaths, layout } from "./config/Paths.js"
export { OrgConfig } from "./config/OrgConfig.js"
export { type Org, OrgSchema, type MountRule, type WorkerSettings } from "./config/schema.js"
export { ConfigError } from "./config/decode.js"
export { InvalidChannelName, InvalidWorkerName } from "./config/names.js"
export { addWorker, BadIdentity, UnknownWorker, WorkerExists } from "./worker/workers.js"
export { RunLog, type RunRecord, RunLogError, type EndedBy } from "./run/RunLog.js"
export { NoRunRecord, type OpenRecord } from "./run/record.js"
export { type KnowledgePush, type KnowledgeResult } from "./contract/knowledge.js"
export { snapshotInfos, type SnapshotInfo, StoreError } from "./box/store.js"

// The services, each a Context.Tag with its live layer.
export { makeRosterLive, type Platform, RosterLive, type Roster, type RosterBase, type RosterParts } from "./RosterLive.js"
export { Docker, type DockerApi, type ContainerSpec, DockerError, DockerUnavailable } from "./docker/Docker.js"
export { DockerLive } from "./docker/DockerLive.js"
export { ImageStore, ImageMissing, type ImageStoreEnv } from "./box/docker/ImageStore.js"
export { Firewall } from "./box/Firewall.js"
export { Vault, VaultError, type VaultEntry } from "./vault/Vault.js"
export { GatewayProbe, type Health } from "./contract/GatewayProbe.js"
export { Dialer } from "./gateway/base/Dialer.js"
export { Audit, type AuditRecord } from "./gateway/base/Audit.js"
export { LiveRuns } from "./gateway/base/LiveRuns.js"
export { HostGit, GitError } from "./knowledge/HostGit.js"
export { Hurry } from "./run/Hurry.js"
export { Fenced, type FencedRun, RunFence } from "./run/RunFence.js"
export { type LedgerEntry, type Spent, SpendLedger, type UsageSum } from "./spend/SpendLedger.js"
export { Files } from "./fs/Files.js"
export { type Report, Reporter, reportLine } from "./report/Reporter.js"

// The errors a run can end with, each naming its fix.
export { ProvisionError } from "./box/provision.js"
export { LockdownError } from "./backend/errors.js"
export { InvalidCeiling } from "./box/ceiling.js"
export { CaMissing } from "./contract/caFiles.js"
export { KnowledgeError } from "./knowledge/canonical.js"

/** Making a deployment, the way `roster init` does. */
export const Deployment = {
  /**
   * Creates the deployment the current {@link Paths} point at (`ROSTER_HOME`, or the XDG folders):
   * config, data and state, org.toml with safe defaults, a first worker and the CA. Never overwrites.
   */
  init: initDeployment
} as const
