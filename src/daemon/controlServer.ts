import { HttpApiBuilder, Path } from "@effect/platform"
import { FileSystem } from "@effect/platform"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Clock, type Context, Effect, Layer, Option, Schema } from "effect"
import * as crypto from "node:crypto"
import * as http from "node:http"
import { ApprovalRefused, ControlApi, NoSuchApproval } from "../api/ControlApi.js"
import { socketAnswers } from "../api/controlClient.js"
import { allowLines, appendToOrgToml } from "../config/appendAllow.js"
import { Gateway } from "../gateway/egress/Gateway.js"
import { OrgConfig } from "../config/OrgConfig.js"
import { Paths, layout } from "../config/Paths.js"
import { VERSION } from "../contract/version.js"
import { Supervisor } from "../supervisor/Supervisor.js"
import { ChatHub } from "../chatHub/ChatHub.js"
import { directRunRoutes, endDirectRuns, makeDirectRuns } from "./directRuns.js"
import { directTalkRoutes, endDirectTalks, makeDirectTalks } from "./directTalks.js"
import { FleetMember } from "../fleet/FleetMember.js"
import { ApprovalBoard, type BoardSilent } from "../contract/ApprovalBoard.js"
import { decisionRefusal, type PendingApproval } from "../contract/approval.js"

export class ControlSocketBusy extends Schema.TaggedError<ControlSocketBusy>()("ControlSocketBusy", { socket: Schema.String }) {
  override get message() {
    return `another roster daemon answers on ${this.socket} — stop it first: roster server stop`
  }
}

const TasksLive = HttpApiBuilder.group(ControlApi, "tasks", (handlers) =>
  handlers
    .handle("add", ({ payload }) => Effect.flatMap(Supervisor, (s) => s.add(payload)))
    .handle("list", ({ urlParams }) => Effect.flatMap(Supervisor, (s) => s.list(urlParams)))
    .handle("show", ({ path }) => Effect.flatMap(Supervisor, (s) => s.show(path.id)))
    .handle("cancel", ({ path }) => Effect.flatMap(Supervisor, (s) => s.cancel(path.id)))
    .handle("retry", ({ path }) => Effect.flatMap(Supervisor, (s) => s.retry(path.id))))

const serverLive = (startedAt: string, configRoot: string) =>
  HttpApiBuilder.group(ControlApi, "server", (handlers) =>
    handlers.handle("fleetBoxes", () =>
      Effect.flatMap(Effect.serviceOption(FleetMember), Option.match({ onNone: () => Effect.succeed([]), onSome: (m) => m.elsewhere })))
    .handle("status", () =>
      Effect.gen(function*() {
        const status = yield* (yield* Supervisor).status
        const hub = yield* Effect.serviceOption(ChatHub)
        const chat = hub._tag === "Some" ? yield* hub.value.status : []
        const member = yield* Effect.serviceOption(FleetMember)
        const fleet = member._tag === "Some" ? { fleet: yield* member.value.status } : {}
        return {
          ...status,
          pid: process.pid,
          version: VERSION,
          config_root: configRoot,
          started_at: startedAt,
          ...(chat.length > 0 ? { chat } : {}),
          ...fleet
        }
      })))

/** Whether this daemon is a node of a fleet: an org.toml it reads but does not own. */
const underCluster = Effect.flatMap(OrgConfig, (c) => c.snapshot).pipe(Effect.map((o) => o.cluster !== undefined), Effect.orElseSucceed(() => false))

/**
 * Decisions on held requests, for the gateway running in this daemon. `always` writes its
 * [[allow]] before the request goes on: the next request of any run finds it in the policy.
 */
const ApprovalsLive = HttpApiBuilder.group(ControlApi, "approvals", (handlers) =>
  handlers
    .handle("list", () => heldAnywhere)
    .handle("decide", ({ path, payload }) =>
      Effect.gen(function*() {
        const approvals = (yield* Gateway).approvals
        const here = yield* approvals.find(path.id)
        // Held by another node of the fleet: decided on the board, taken by that node's gateway.
        const board = Option.getOrUndefined(yield* Effect.serviceOption(ApprovalBoard))
        const held = Option.isSome(here) || !board ? here : yield* onBoard(board, path.id)
        if (Option.isNone(held)) return yield* Effect.fail(new NoSuchApproval({ id: path.id }))
        const a = held.value
        // A request a grant's rule asks about is approved once or denied: its rule asks again for the next.
        const notThat = decisionRefusal(a, payload.decision)
        if (notThat) return yield* Effect.fail(new ApprovalRefused({ id: a.id, reason: notThat }))
        const lines = payload.decision === "always"
          ? allowLines(a.worker, a.host, a.port, payload.by, new Date(yield* Clock.currentTimeMillis).toISOString())
          : undefined
        if (lines && (yield* underCluster)) {
          return yield* Effect.fail(new ApprovalRefused({
            id: a.id,
            reason: "this node is one of a fleet ([cluster]): its org.toml is the same file on every node, put there by whatever deploys them, " +
              `so roster does not edit it — add these lines there:\n${lines.join("\n")}\nand approve this one with --run (or --once) meanwhile`
          }))
        }
        if (lines) {
          yield* appendToOrgToml(lines).pipe(Effect.mapError((e) => new ApprovalRefused({ id: a.id, reason: `org.toml could not be written: ${e.message}` })))
        }
        const decided = Option.isSome(here) || !board
          ? yield* approvals.decide(a.id, payload)
          : yield* board.decide(a.id, payload).pipe(Effect.mapError((e) => boardSilent(a.id, e)))
        if (Option.isNone(decided)) return yield* Effect.fail(new NoSuchApproval({ id: path.id }))
        // The holding node told at once, so the held connection goes on before this answer does.
        const member = yield* Effect.serviceOption(FleetMember)
        if (Option.isNone(here) && a.node && Option.isSome(member)) yield* member.value.nudgeApprovals(a.node)
        yield* Effect.logInfo(
          `gateway: ${payload.by} decided ${payload.decision} on ${a.method} ${a.host}:${a.port} for run ${a.run_id} (${a.worker})` +
            (Option.isSome(here) ? "" : `, held on node ${a.node ?? "?"}`)
        )
        return { approval: decided.value, decision: payload.decision, ...(lines ? { org_toml: lines } : {}) }
      })))

/** This gateway's held requests and, on a fleet node, every other node's still waiting (a board that does not answer: this node's, said). */
const heldAnywhere = Effect.gen(function*() {
  const here = yield* (yield* Gateway).approvals.list
  const board = yield* Effect.serviceOption(ApprovalBoard)
  if (Option.isNone(board)) return here
  const fleet = yield* board.value.waiting.pipe(Effect.catchAll((e) =>
    Effect.logWarning(`control: only this node's held requests are listed: the fleet's board does not answer (${e.detail})`).pipe(
      Effect.as([] as ReadonlyArray<PendingApproval>)
    )
  ))
  const ids = new Set(here.map((a) => a.id))
  return [...here, ...fleet.filter((a) => !ids.has(a.id))].sort((a, b) => a.asked_at.localeCompare(b.asked_at))
})

/** A request another node holds, still waiting, from the fleet's board. */
const onBoard = (board: Context.Tag.Service<ApprovalBoard>, id: string) =>
  board.waiting.pipe(
    Effect.map((waiting) => Option.fromNullable(waiting.find((a) => a.id === id))),
    Effect.mapError((e) => boardSilent(id, e))
  )

const boardSilent = (id: string, e: BoardSilent) =>
  new ApprovalRefused({ id, reason: `${e.message}: try again, or decide it on the node that holds it` })


/**
 * The control API on `state/control.sock`: bound inside a fresh 0700 folder, made 0600, then
 * renamed into place, so there is no moment when another local user could connect. A stale
 * socket from a killed daemon is replaced; a live one is another daemon and refused.
 */
export const serveControl = Effect.fn("daemon.control")(function*() {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const paths = yield* Paths
  const socket = layout(paths).controlSocket
  if (yield* socketAnswers(socket)) return yield* Effect.fail(new ControlSocketBusy({ socket }))
  yield* fs.remove(socket).pipe(Effect.catchTag("SystemError", () => Effect.void))
  const privateDir = path.join(paths.state, `.control-${crypto.randomBytes(4).toString("hex")}`)
  yield* fs.makeDirectory(privateDir, { mode: 0o700 })
  const bound = path.join(privateDir, "sock")
  const startedAt = new Date(yield* Clock.currentTimeMillis).toISOString()
  const api = HttpApiBuilder.api(ControlApi).pipe(
    Layer.provide(TasksLive),
    Layer.provide(serverLive(startedAt, paths.config)),
    Layer.provide(ApprovalsLive)
  )
  const directRuns = yield* makeDirectRuns
  const directTalks = yield* makeDirectTalks
  const server = HttpApiBuilder.serve().pipe(
    Layer.provide(directRunRoutes(paths, directRuns)),
    Layer.provide(directTalkRoutes(paths, directTalks)),
    Layer.provide(api),
    Layer.provide(NodeHttpServer.layer(() => http.createServer(), { path: bound }))
  )
  yield* Layer.buildWithScope(server, yield* Effect.scope)
  // Before the server closes (it waits for every answer to end): the runs held for CLIs end first.
  yield* Effect.addFinalizer(() => Effect.zip(endDirectRuns(directRuns), endDirectTalks(directTalks)))
  yield* fs.chmod(bound, 0o600)
  yield* fs.rename(bound, socket)
  // Both best-effort: an empty private folder left is harmless, and a stale socket is replaced by the next daemon's bind.
  yield* fs.remove(privateDir, { recursive: true }).pipe(Effect.ignore)
  yield* Effect.addFinalizer(() => fs.remove(socket).pipe(Effect.ignore))
  return socket
})
