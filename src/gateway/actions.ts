import { Clock, Effect, Schema } from "effect"
import type * as http from "node:http"
import { Paths, layout } from "../config/Paths.js"
import { runFiles } from "../contract/runFiles.js"
import { Files } from "../fs/Files.js"
import { lookupToken } from "./identify.js"
import { auditTrace, type RequestTrace } from "./supervise.js"

const MAX_BODY = 64 * 1024
const MAX_TEXT = 8000

const MessageUser = Schema.parseJson(Schema.Struct({ text: Schema.String }))

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
    const caller = who.caller
    trace.run_id = caller.runId
    trace.subject = caller.subject
    const done = (status: number, body: unknown) => answer(res, status, body).pipe(Effect.zipRight(auditTrace(trace, { status })))
    if (req.method !== "POST" || trace.path !== "/v1/actions/message_user") return yield* done(404, { ok: false, error: "no such action" })
    const body = yield* readBody(req)
    const text = body === undefined ? undefined : Schema.decodeUnknownOption(MessageUser)(body).pipe((o) => (o._tag === "Some" ? o.value.text : undefined))
    if (text === undefined || text.trim() === "" || text.length > MAX_TEXT) {
      return yield* done(400, { ok: false, error: `text must be a non-empty string of at most ${MAX_TEXT} characters` })
    }
    const runDir = layout(yield* Paths).runDir(caller.worker, caller.runId)
    const time = new Date(yield* Clock.currentTimeMillis).toISOString()
    const record = { time, run_id: caller.runId, task_id: caller.taskId, worker: caller.worker, text }
    const written = yield* (yield* Files).append(runFiles(runDir).messages, `${JSON.stringify(record)}\n`).pipe(Effect.either)
    if (written._tag === "Left") {
      yield* Effect.logWarning(`gateway: a message_user of run ${caller.runId} could not be recorded: ${written.left.message}`)
      return yield* done(500, { ok: false, error: "the message could not be recorded" })
    }
    yield* done(200, { ok: true })
  })
