import { Effect } from "effect"
import * as fsp from "node:fs/promises"
import type * as http from "node:http"
import * as path from "node:path"
import { Paths, layout } from "../config/Paths.js"
import { audit } from "./audit.js"
import { lookupToken } from "./identify.js"

const MAX_BODY = 64 * 1024
const MAX_TEXT = 8000

/** Where a run's messages to its person are recorded (beside run.json). */
export const messagesFile = (runDir: string) => path.join(runDir, "messages.jsonl")

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
export const handleAction = (req: http.IncomingMessage, res: http.ServerResponse) =>
  Effect.gen(function*() {
    const startedAt = Date.now()
    const url = req.url ?? ""
    const token = /^Bearer\s+(\S+)$/i.exec(String(req.headers.authorization ?? ""))?.[1] ?? ""
    const who = yield* lookupToken(token)
    const base = { host: "roster-gateway", port: 0, method: req.method ?? "POST", path: url.split("?")[0] ?? "", injected: false, bytes_up: 0, bytes_down: 0 }
    if (!who.ok || !who.caller.runId || !who.caller.worker) {
      yield* answer(res, 401, { ok: false, error: who.ok ? "a run token is required" : who.reason })
      return yield* audit({ ...base, run_id: null, subject: "?", status: 401, duration_ms: Date.now() - startedAt })
    }
    const caller = who.caller
    const done = (status: number, body: unknown) =>
      answer(res, status, body).pipe(Effect.zipRight(audit({ ...base, run_id: caller.runId, subject: caller.subject, status, duration_ms: Date.now() - startedAt })))
    if (req.method !== "POST" || base.path !== "/v1/actions/message_user") return yield* done(404, { ok: false, error: "no such action" })
    const body = yield* readBody(req)
    let text: unknown
    try {
      text = body === undefined ? undefined : (JSON.parse(body) as { text?: unknown }).text
    } catch {
      text = undefined
    }
    if (typeof text !== "string" || text.trim() === "" || text.length > MAX_TEXT) {
      return yield* done(400, { ok: false, error: `text must be a non-empty string of at most ${MAX_TEXT} characters` })
    }
    const runDir = layout(yield* Paths).runDir(caller.worker, caller.runId)
    const record = { time: new Date().toISOString(), run_id: caller.runId, task_id: caller.taskId, worker: caller.worker, text }
    const written = yield* Effect.tryPromise(() => fsp.appendFile(messagesFile(runDir), `${JSON.stringify(record)}\n`, { mode: 0o600 })).pipe(Effect.either)
    if (written._tag === "Left") return yield* done(500, { ok: false, error: "the message could not be recorded" })
    yield* done(200, { ok: true })
  })
