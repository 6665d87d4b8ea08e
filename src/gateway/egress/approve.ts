import { Clock, Effect, Option } from "effect"
import * as net from "node:net"
import { OrgConfig } from "../../config/OrgConfig.js"
import { isRefusedAddress, normalizeHost } from "../../contract/addresses.js"
import { Dialer } from "../base/Dialer.js"
import type { Caller } from "../base/identify.js"
import { Refusal } from "../base/refusal.js"
import { authorize, type Authorized } from "./authorize.js"
import { Gateway } from "./Gateway.js"

/** What a held request shows a person: its method, and its path without the query (null for a CONNECT). */
export interface AskedFor {
  readonly method: string
  readonly path: string | null
}

/** Authorised as an [[allow]] of this one host:port for this subject: a tunnel, never a grant. */
const approved = (org: Authorized["org"], caller: Caller, host: string, port: number, by: string): Authorized & { readonly approvedBy: string } => ({
  host,
  port,
  org,
  decision: { allowed: true, via: "allow", rule: { hosts: [host], ports: [port], scope: [caller.subject] } },
  approvedBy: by
})

/** Private, loopback and metadata addresses are never approvable: by literal, or by what the name resolves to. */
const reachesPrivate = (host: string) =>
  net.isIP(host) !== 0
    ? Effect.succeed(isRefusedAddress(host))
    : Effect.flatMap(Dialer, (d) => d.resolve(host)).pipe(
      Effect.map((addrs) => addrs.length === 0 || addrs.some(isRefusedAddress)),
      Effect.orElseSucceed(() => true)
    )

/**
 * A refusal by policy held for a person (`[gateway] approvals = "ask"`): the request waits up to
 * `approval_wait_s` as a pending approval; `once`, `run` and `always` let it through as a
 * tunnel (`run` remembers host:port for the rest of the run), `deny` or no decision in time is
 * the 403 it would have had, saying which.
 */
const askFor = (caller: Caller, rawHost: string, port: number, asked: AskedFor, refusal: Refusal) =>
  Effect.gen(function*() {
    const why = refusal.detail.why
    if (why !== "no_rule" && why !== "wrong_port") return yield* Effect.fail(refusal)
    const org = yield* (yield* OrgConfig).snapshot.pipe(Effect.mapError(() => refusal))
    if (org.gateway.approvals !== "ask" || !caller.runId || !caller.worker) return yield* Effect.fail(refusal)
    const host = normalizeHost(rawHost)
    const approvals = (yield* Gateway).approvals
    if (approvals.allowedForRun(caller.runId, host, port)) return approved(org, caller, host, port, "an earlier --run approval")
    if (yield* reachesPrivate(host)) return yield* Effect.fail(refusal)
    const wait = org.gateway.approval_wait_s
    yield* Effect.logWarning(
      `gateway: run ${caller.runId} (${caller.worker}) asks for ${asked.method} ${host}:${port}${asked.path ?? ""}, which the policy refuses: ` +
        `waiting ${wait} s for roster approvals / approve / deny`
    )
    const answer = yield* approvals.ask(
      { run_id: caller.runId, worker: caller.worker, subject: caller.subject, method: asked.method, host, port, path: asked.path },
      yield* Clock.currentTimeMillis,
      wait * 1000
    )
    if (Option.isNone(answer)) {
      return yield* Effect.fail(new Refusal(403, `${refusal.reason} — it waited ${wait} s for an approval and no one approved it`, refusal.detail))
    }
    const { by, decision } = answer.value
    if (decision === "deny") return yield* Effect.fail(new Refusal(403, `${refusal.reason} — ${by} denied it`, refusal.detail))
    return approved(org, caller, host, port, `${by} (${decision})`)
  })

/** `authorize`, with a refusal by policy held for a person's decision where `[gateway] approvals = "ask"`. */
export const authorizeOrAsk = (caller: Caller, host: string, port: number, asked: AskedFor) =>
  authorize(caller, host, port).pipe(
    Effect.map((a): Authorized & { readonly approvedBy?: string } => a),
    Effect.catchAll((refusal) => askFor(caller, host, port, asked, refusal))
  )
