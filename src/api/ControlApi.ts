import { HttpApi, HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { CeilingMinutes } from "../config/ceiling.js"
import { NoSuchTask, TaskRecord, TaskRefused, TaskStatus, TaskStoreError } from "../task/TaskRecord.js"
import { ChatListenerStatus } from "../contract/chatStatus.js"
import { ApprovalDecision, ApprovalId, PendingApproval } from "../contract/approval.js"
import { TaskId as TaskIdForm } from "../config/names.js"
import { FleetStatus, NodeBoxes } from "../contract/fleet.js"

/** What `roster task add` asks for. */
export const AddTask = Schema.Struct({
  worker: Schema.String,
  prompt: Schema.String,
  ceiling_min: Schema.optional(CeilingMinutes),
  after: Schema.optional(Schema.String),
  channel: Schema.optional(Schema.String),
  /** A task of the same worker whose conversation this one carries on. */
  continue: Schema.optional(Schema.String),
  /** Where its answer goes: talk:<run-id>, task:<id>, none. */
  reply_to: Schema.optional(Schema.String),
  /** An idempotency key: while a task with it waits or runs, the add gives that task back (existed: true). */
  key: Schema.optional(Schema.String),
  /** Tries again after a failure that is no person's decision (absent: [supervisor] retries). */
  retries: Schema.optional(Schema.Number),
  /** Not before this time: an ISO time, or a span from now (+30m). */
  at: Schema.optional(Schema.String),
  /** Which way the person came in (the CLI, the web UI; a bare API call otherwise). */
  via: Schema.optional(Schema.Literal("cli", "web", "api"))
})

export const TaskFilter = Schema.Struct({
  worker: Schema.optional(Schema.String),
  status: Schema.optional(TaskStatus),
  /** The archived tasks too (finished past [supervisor] keep_days). */
  all: Schema.optional(Schema.BooleanFromString)
})

/** A live box of this deployment as the daemon sees it. */
export const BoxView = Schema.Struct({
  run_id: Schema.String,
  worker: Schema.String,
  kind: Schema.String,
  task_id: Schema.NullOr(Schema.String),
  /** Who holds it: this daemon (a task), a CLI run or session, or this daemon after its owner died. */
  held_by: Schema.Literal("daemon", "owner", "adopted", "reaping"),
  age_s: Schema.Number,
  remaining_s: Schema.NullOr(Schema.Number)
})
export type BoxView = typeof BoxView.Type

export const ServerStatus = Schema.Struct({
  pid: Schema.Number,
  version: Schema.String,
  config_root: Schema.String,
  started_at: Schema.String,
  queue: Schema.Record({ key: Schema.String, value: Schema.Number }),
  boxes: Schema.Array(BoxView),
  /** Of those, the warm ones: made ready for a worker's next run, no run has taken yet (kind "warm"). */
  warm: Schema.optional(Schema.Number),
  adopted: Schema.Number,
  reaped: Schema.Number,
  held_reason: Schema.NullOr(Schema.String),
  /** The daemon's `[[chat]]` listeners (absent when it has none). */
  chat: Schema.optional(Schema.Array(ChatListenerStatus)),
  /** Under [cluster]: this node and the fleet's nodes (absent on a machine on its own). */
  fleet: Schema.optional(FleetStatus)
})
export type ServerStatus = typeof ServerStatus.Type

/**
 * The ids a path carries, each in its own form only: nothing a client puts in a path can hold a
 * "/", "." or "%" (HttpApiClient puts path parameters into the URL as they are), and the server
 * refuses a path whose id is not of its form (400) before any handler runs.
 */
const TaskPath = Schema.Struct({ id: TaskIdForm })

/** What an add answers: the task, and `existed` when its key was in use by one that waits or runs (no twin queued). */
export const AddedTaskView = Schema.Struct({ ...TaskRecord.fields, existed: Schema.optional(Schema.Boolean) })
const ApprovalPath = Schema.Struct({ id: ApprovalId })

export class TasksGroup extends HttpApiGroup.make("tasks")
  .add(HttpApiEndpoint.post("add", "/tasks").setPayload(AddTask).addSuccess(AddedTaskView)
    .addError(TaskRefused, { status: 400 }).addError(TaskStoreError, { status: 500 }))
  .add(HttpApiEndpoint.get("list", "/tasks").setUrlParams(TaskFilter).addSuccess(Schema.Array(TaskRecord)))
  .add(HttpApiEndpoint.get("show", "/tasks/:id").setPath(TaskPath).addSuccess(TaskRecord).addError(NoSuchTask, { status: 404 }))
  .add(HttpApiEndpoint.post("cancel", "/tasks/:id/cancel").setPath(TaskPath).addSuccess(TaskRecord)
    .addError(NoSuchTask, { status: 404 }).addError(TaskRefused, { status: 409 }).addError(TaskStoreError, { status: 500 }))
  .add(HttpApiEndpoint.post("retry", "/tasks/:id/retry").setPath(TaskPath).addSuccess(TaskRecord)
    .addError(NoSuchTask, { status: 404 }).addError(TaskRefused, { status: 409 }).addError(TaskStoreError, { status: 500 }))
{}

export class ServerGroup extends HttpApiGroup.make("server")
  .add(HttpApiEndpoint.get("status", "/status").addSuccess(ServerStatus))
  /** Under [cluster]: every other live node's boxes, from its runner RPC (none on a machine on its own). */
  .add(HttpApiEndpoint.get("fleetBoxes", "/fleet/boxes").addSuccess(Schema.Array(NodeBoxes)))
{}

/** What `roster approve` / `deny` (or the web's buttons) decide, and who decided. */
export const Decide = Schema.Struct({ decision: ApprovalDecision, by: Schema.String })

export const Decided = Schema.Struct({
  approval: PendingApproval,
  decision: ApprovalDecision,
  /** `always`: the lines appended to org.toml. */
  org_toml: Schema.optional(Schema.Array(Schema.String))
})

/** No held request has this id: decided already, answered by its timeout, or never held. */
export class NoSuchApproval extends Schema.TaggedError<NoSuchApproval>()("NoSuchApproval", { id: Schema.String }) {
  override get message() {
    return `no request ${this.id} is waiting for a decision (decided already, or its wait ran out) — see roster approvals`
  }
}

/** A decision that cannot be carried out (org.toml not writable, say), with why. */
export class ApprovalRefused extends Schema.TaggedError<ApprovalRefused>()("ApprovalRefused", { id: Schema.String, reason: Schema.String }) {
  override get message() {
    return `cannot carry out the decision on ${this.id}: ${this.reason}`
  }
}

export class ApprovalsGroup extends HttpApiGroup.make("approvals")
  .add(HttpApiEndpoint.get("list", "/approvals").addSuccess(Schema.Array(PendingApproval)))
  .add(HttpApiEndpoint.post("decide", "/approvals/:id").setPath(ApprovalPath).setPayload(Decide).addSuccess(Decided)
    .addError(NoSuchApproval, { status: 404 }).addError(ApprovalRefused, { status: 409 }))
{}

/**
 * The daemon's control API, declared once: the daemon serves it on `state/control.sock`
 * (0600), and the CLI (and a dashboard) derive their clients from the same declaration.
 */
export class ControlApi extends HttpApi.make("roster").add(TasksGroup).add(ServerGroup).add(ApprovalsGroup) {}
