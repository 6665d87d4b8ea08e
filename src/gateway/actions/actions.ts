import { Effect } from "effect"
import type * as http from "node:http"
import type { ActionAnswer, BoxCaller } from "./actionTypes.js"
import type { GatewayEnv } from "../base/env.js"
import { lookupToken } from "../base/identify.js"
import { PREFLIGHT_PATH } from "../../contract/preflight.js"
import { awaitPreflight } from "../egress/preflightGate.js"
import { preflightReport } from "./preflightReport.js"
import { chatSend } from "./chat/sendAction.js"
import { knowledgePushAction } from "./knowledgePush.js"
import { forgetAction, rememberAction } from "./memoryActions.js"
import { messageUser } from "./messageUser.js"
import { termSend } from "./termSend.js"
import { setTasks } from "./setTasks.js"
import { auditTrace, type RequestTrace } from "../base/supervise.js"
import { RunFence } from "../../run/RunFence.js"
import { Gateway } from "../egress/Gateway.js"

const MAX_BODY = 64 * 1024

const answer = (res: http.ServerResponse, status: number, body: unknown) =>
  Effect.sync(() => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body)))

const readBody = (req: http.IncomingMessage) =>
  Effect.async<string | undefined>((resume) => {
    let body = ""
    let size = 0
    req.setEncoding("utf8")
    req.on("data", (c: string) => {
      size += Buffer.byteLength(c)
      if (size > MAX_BODY) {
        req.destroy()
        resume(Effect.succeed(undefined))
      } else body += c
    })
    req.once("end", () => resume(Effect.succeed(body)))
    req.once("error", () => resume(Effect.succeed(undefined)))
  })

const ACTIONS: Readonly<Record<string, (caller: BoxCaller, body: string) => Effect.Effect<ActionAnswer, never, GatewayEnv>>> = {
  "/v1/actions/message_user": messageUser,
  "/v1/actions/term_send": termSend,
  "/v1/actions/set_tasks": setTasks,
  "/v1/actions/knowledge_push": knowledgePushAction,
  "/v1/actions/remember": rememberAction,
  "/v1/actions/forget": forgetAction,
  "/v1/actions/slack_send": chatSend("slack"),
  "/v1/actions/discord_send": chatSend("discord")
}

/**
 * The actions that land a run's work where it outlives the run: in a fleet, each is refused (409)
 * once the run's node has been fenced, and runs holding the fleet's word that it has not been.
 */
const LANDING: ReadonlySet<string> = new Set([
  "/v1/actions/set_tasks",
  "/v1/actions/knowledge_push",
  "/v1/actions/remember",
  "/v1/actions/forget"
])

/**
 * Box actions on the gateway itself (POST /v1/actions/<name>), authenticated by the run token
 * as `Authorization: Bearer`. Provenance — worker, run, task — comes from the token alone.
 */
export const handleAction = (req: http.IncomingMessage, res: http.ServerResponse, trace: RequestTrace) =>
  Effect.gen(function*() {
    const token = /^Bearer\s+(\S+)$/i.exec(String(req.headers.authorization ?? ""))?.[1] ?? ""
    // A warm box (its token bound to no run) may report its preflight, so a claim never waits for it; nothing else.
    const who = yield* lookupToken(token, undefined, trace.path === PREFLIGHT_PATH)
    if (!who.ok || !who.caller.runId || !who.caller.worker) {
      const status = !who.ok && who.why === "cut_off" ? 503 : !who.ok && who.why === "warm" ? 403 : 401
      yield* answer(res, status, { ok: false, error: who.ok ? "a run token is required" : who.reason })
      return yield* auditTrace(trace, { status })
    }
    const caller = who.caller as BoxCaller
    trace.run_id = caller.runId
    trace.subject = caller.subject
    const done = yield* (trace.path === PREFLIGHT_PATH ? postBody(req, (body) => preflightReport(caller, body)) : heldAction(req, trace.path, caller))
    yield* answer(res, done.status, done.body)
    yield* auditTrace(trace, { status: done.status })
  })

/** The request's body handed to `then`, when it is a POST of at most MAX_BODY bytes. */
const postBody = <E, R>(req: http.IncomingMessage, then: (body: string) => Effect.Effect<ActionAnswer, E, R>): Effect.Effect<ActionAnswer, E, R> =>
  req.method !== "POST"
    ? Effect.succeed<ActionAnswer>({ status: 405, body: { ok: false, error: "POST only" } })
    : Effect.flatMap(readBody(req), (body) =>
      body === undefined ? Effect.succeed<ActionAnswer>({ status: 413, body: { ok: false, error: `the body is larger than ${MAX_BODY} bytes` } }) : then(body))

/** An action, once the run's preflight has passed (a box's actions wait for it like its egress). */
const heldAction = (req: http.IncomingMessage, path: string, caller: BoxCaller) =>
  Effect.gen(function*() {
    const action = req.method === "POST" && Object.hasOwn(ACTIONS, path) ? ACTIONS[path] : undefined
    if (action === undefined) return { status: 404, body: { ok: false, error: "no such action" } } satisfies ActionAnswer
    const held = yield* awaitPreflight(caller).pipe(Effect.either)
    if (held._tag === "Left") return { status: held.left.status, body: { ok: false, error: held.left.reason } } satisfies ActionAnswer
    if (!LANDING.has(path)) return yield* postBody(req, (body) => action(caller, body))
    // A taint this run's record could not take holds what the taint would have held (fail closed).
    if ((yield* Gateway).taints.isUnrecorded(caller.runId)) {
      return {
        status: 503,
        body: { ok: false, error: "a taint of this run could not be recorded: its pushes, memories and follow-ups are refused (roster runs show names why)" }
      } satisfies ActionAnswer
    }
    const fence = yield* RunFence
    return yield* postBody(req, (body) => fence.guard({ runId: caller.runId, taskId: caller.taskId }, action(caller, body))).pipe(
      Effect.catchTag("Fenced", (e) =>
        Effect.logWarning(`gateway: ${path.slice("/v1/actions/".length)} of run ${caller.runId} (${caller.worker}) refused: ${e.message}`).pipe(
          Effect.as<ActionAnswer>({ status: 409, body: { ok: false, error: e.message } })
        ))
    )
  })
