import { Effect } from "effect"
import type * as http from "node:http"
import type { ActionAnswer, BoxCaller } from "./actionTypes.js"
import type { GatewayEnv } from "../base/env.js"
import { lookupToken } from "../base/identify.js"
import { chatSend } from "./chat/sendAction.js"
import { knowledgePushAction } from "./knowledgePush.js"
import { forgetAction, rememberAction } from "./memoryActions.js"
import { messageUser } from "./messageUser.js"
import { setTasks } from "./setTasks.js"
import { auditTrace, type RequestTrace } from "../base/supervise.js"

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
  "/v1/actions/set_tasks": setTasks,
  "/v1/actions/knowledge_push": knowledgePushAction,
  "/v1/actions/remember": rememberAction,
  "/v1/actions/forget": forgetAction,
  "/v1/actions/slack_send": chatSend("slack"),
  "/v1/actions/discord_send": chatSend("discord")
}

/**
 * Box actions on the gateway itself (POST /v1/actions/<name>), authenticated by the run token
 * as `Authorization: Bearer`. Provenance — worker, run, task — comes from the token alone.
 */
export const handleAction = (req: http.IncomingMessage, res: http.ServerResponse, trace: RequestTrace) =>
  Effect.gen(function*() {
    const token = /^Bearer\s+(\S+)$/i.exec(String(req.headers.authorization ?? ""))?.[1] ?? ""
    const who = yield* lookupToken(token)
    if (!who.ok || !who.caller.runId || !who.caller.worker) {
      yield* answer(res, 401, { ok: false, error: who.ok ? "a run token is required" : who.reason })
      return yield* auditTrace(trace, { status: 401 })
    }
    const caller = who.caller as BoxCaller
    trace.run_id = caller.runId
    trace.subject = caller.subject
    const action = req.method === "POST" && Object.hasOwn(ACTIONS, trace.path) ? ACTIONS[trace.path] : undefined
    const done: ActionAnswer = action === undefined
      ? { status: 404, body: { ok: false, error: "no such action" } }
      : yield* Effect.flatMap(readBody(req), (body) =>
        body === undefined ? Effect.succeed({ status: 413, body: { ok: false, error: `the body is larger than ${MAX_BODY} bytes` } }) : action(caller, body))
    yield* answer(res, done.status, done.body)
    yield* auditTrace(trace, { status: done.status })
  })
