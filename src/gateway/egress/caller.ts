import { Effect } from "effect"
import type * as http from "node:http"
import { identify, refusalStatus } from "../base/identify.js"
import { Refusal } from "../base/refusal.js"
import type { RequestTrace } from "../base/supervise.js"
import { Gateway } from "./Gateway.js"

/** Who a request is from (its run token, or the host on loopback), noted on its trace; refused (407, 403, 503) when no one the gateway serves. */
export const callerOf = (req: http.IncomingMessage, trace: RequestTrace) =>
  Effect.gen(function*() {
    const who = yield* identify(req.headers, req.socket.remoteAddress, (yield* Gateway).identities)
    if (!who.ok) return yield* new Refusal(refusalStatus(who.why), who.reason, { why: who.why })
    trace.run_id = who.caller.runId
    trace.subject = who.caller.subject
    trace.caller = who.caller
    return who.caller
  })
