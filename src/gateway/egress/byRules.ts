import { Effect } from "effect"
import type * as http from "node:http"
import type { Caller } from "../base/identify.js"
import { readBody } from "../base/requestBody.js"
import { type RuledEntry, ruleRequest } from "../base/requestRules.js"
import { askByRule, socketEnded } from "./approve.js"

/** An audit line's note for a request a person let through: who approved it, then what else the line says. */
export const approvedNote = (approvedBy: string, note?: string) => [`approved by ${approvedBy}`, note].filter(Boolean).join("; ")

/** Where a request goes and for whom: a terminated tunnel's target, or a plain forward's. */
export interface RuledTarget {
  readonly caller: Caller
  readonly host: string
  readonly port: number
}

/**
 * The entry's request rules on `req`, on the path the upstream will get: `req.url` is set to the
 * canonical path (and query) the rules saw, so the upstream gets what was decided. Its body is read
 * first when a GraphQL or JSON-RPC rule needs it (that body is then the one to send, `raw`); a rule
 * that asks holds it for a person. An upgrade is decided by websocket = true rules only. Fails with
 * the refusal; an approval says who gave it.
 */
export const byRules = (target: RuledTarget, req: http.IncomingMessage, path: string, entry: RuledEntry, limit: number, upgrade = false) =>
  Effect.gen(function*() {
    const where = { host: target.host, port: target.port, subject: target.caller.subject }
    const method = req.method ?? "GET"
    let ruled = ruleRequest(entry, method, path, where, undefined, upgrade)
    let raw: Buffer | undefined
    if (!ruled.ok && ruled.needsBody) {
      raw = yield* readBody(req, limit)
      ruled = ruleRequest(entry, method, path, where, { contentType: String(req.headers["content-type"] ?? ""), raw }, upgrade)
    }
    if (ruled.ok) {
      req.url = ruled.url
      return { raw, approvedBy: undefined }
    }
    if (!ruled.ask) return yield* Effect.fail(ruled.refusal)
    // Approved, it goes on as an allowed one would.
    const approvedBy = yield* askByRule(target.caller, target.host, target.port, { method, path: ruled.ask.path }, ruled.ask.rule, ruled.refusal, socketEnded(req.socket))
    req.url = ruled.ask.url
    return { raw, approvedBy }
  })
