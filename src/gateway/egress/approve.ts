import { Clock, Effect, Ref } from "effect"
import { type ApprovalCard, closeApprovalCard, postApprovalCard } from "../../chat/approvalCard.js"
import { type ChatPlace, parseReplyTo } from "../../contract/origin.js"
import { readRunContextOrWhy } from "../../run/runContext.js"
import type { CardPlace, HoldEnd, PendingApproval } from "../base/approvals.js"
import type { Duplex } from "node:stream"
import * as net from "node:net"
import { OrgConfig } from "../../config/OrgConfig.js"
import type { Org } from "../../config/schema.js"
import { isRefusedAddress } from "../../contract/addresses.js"
import { Dialer } from "../base/Dialer.js"
import { LiveRuns } from "../base/LiveRuns.js"
import type { Caller } from "../base/identify.js"
import { Refusal } from "../base/refusal.js"
import type { AskedFor, Hold } from "../policy/verdict.js"
import { Gateway } from "./Gateway.js"

/** Private, loopback and metadata addresses are never approvable: by literal, or by what the name resolves to. */
const reachesPrivate = (host: string) =>
  net.isIP(host) !== 0
    ? Effect.succeed(isRefusedAddress(host))
    : Effect.flatMap(Dialer, (d) => d.resolve(host)).pipe(
      Effect.map((addrs) => addrs.length === 0 || addrs.some(isRefusedAddress)),
      // A name that does not resolve is taken for private: fail closed, never offered to a person to approve.
      Effect.orElseSucceed(() => true)
    )

/** Completes when the run's box is gone: its held requests have no one to answer. */
const runEnded = (runId: string) =>
  Effect.gen(function*() {
    const live = yield* LiveRuns
    while (yield* live.isLive(runId)) yield* Effect.sleep(RUN_LOOK)
    return "its run ended"
  })

/** How often a held request looks whether its run is still live. */
const RUN_LOOK = "1 second"

/**
 * A request the decision holds for a person (a Hold verdict), waiting up to `approval_wait_s` as a pending
 * approval: a grant's or allow's rule that asks takes `once` (the rule holds the next again) or `deny`; a
 * refusal by policy under `[gateway] approvals = "ask"` takes `once`, `run` (host:port for the rest of the run)
 * or `always` — and is never held for a private, loopback or metadata address. Succeeds with who approved it
 * (for the audit line); `deny`, no decision in time, or its connection or run ending fails with the refusal,
 * saying which.
 */
export const holdFor = (caller: Caller, held: Hold, closed: Effect.Effect<void>) =>
  Effect.gen(function*() {
    const { refusal, asked, rule, host, port } = held
    if (!caller.runId || !caller.worker) return yield* Effect.fail(refusal)
    const runId = caller.runId
    const worker = caller.worker
    const org = yield* (yield* OrgConfig).snapshot.pipe(Effect.mapError(() => refusal))
    if (rule === undefined) {
      if ((yield* Gateway).approvals.allowedForRun(runId, host, port)) return "an earlier --run approval"
      if (yield* reachesPrivate(host)) return yield* Effect.fail(refusal)
    }
    const wait = org.gateway.approval_wait_s
    yield* Effect.logWarning(
      `gateway: run ${runId} (${worker}) asks for ${asked.method} ${host}:${port}${asked.path ?? ""}, which ` +
        `${rule ? `${rule} asks a person about` : "the policy refuses"}: waiting ${wait} s for roster approvals / approve / deny`
    )
    const end = yield* hold(caller, runId, worker, host, port, asked, closed, org, rule)
    const { by, decision, at } = yield* heldAnswer(end, refusal, wait)
    return `${by} (${decision})${at}`
  })

/** A request held until a person decides, its wait runs out, or its connection or run ends; its card, where its run has a thread. */
const hold = (
  caller: Caller, runId: string, worker: string, host: string, port: number, asked: AskedFor, closed: Effect.Effect<void>, org: Org, rule?: string
) =>
  Effect.gen(function*() {
    const approvals = (yield* Gateway).approvals
    // A held request is owned by its connection and its run: either's end takes it off the list.
    const gone = Effect.race(Effect.as(closed, "the box closed its connection"), runEnded(runId))
    const limits = { perRun: org.gateway.approvals_max_per_run, total: org.gateway.approvals_max }
    const wait = org.gateway.approval_wait_s
    const now = yield* Clock.currentTimeMillis
    return yield* withCard(worker, runId, (onHeld) =>
      approvals.ask(
        { run_id: runId, worker, subject: caller.subject, method: asked.method, host, port, path: asked.path, ...(rule ? { rule } : {}) },
        now,
        wait * 1000,
        limits,
        gone,
        onHeld
      ), (end) => cardEnd(asked, host, port, worker, wait, end))
  })

/** How a hold ended, as the request's answer: a person's approval (who, what, where), or `refusal` saying why not. */
const heldAnswer = (end: HoldEnd, refusal: Refusal, wait: number) =>
  Effect.gen(function*() {
    if (end._tag === "full") return yield* Effect.fail(new Refusal(429, `${refusal.reason} — not held for a decision: ${end.why}`, refusal.detail))
    if (end._tag === "gone") return yield* Effect.fail(new Refusal(403, `${refusal.reason} — it was held for a decision until ${end.why}`, refusal.detail))
    if (end._tag === "timeout") {
      return yield* Effect.fail(new Refusal(403, `${refusal.reason} — it waited ${wait} s for an approval and no one approved it`, refusal.detail))
    }
    const { by, decision, where } = end.decided
    const at = where ? ` in ${where}` : ""
    if (decision === "deny") return yield* Effect.fail(new Refusal(403, `${refusal.reason} — ${by} denied it${at}`, refusal.detail))
    return { by, decision, at }
  })

/** The chat thread a run's held requests are decided in: its chat session's, or the chat place its task answers to. */
export const approvalPlace = (worker: string, runId: string) =>
  readRunContextOrWhy(worker, runId).pipe(
    // The request is held all the same (roster approvals, the web list it): only where to post its card is not known.
    Effect.tap(({ problem }) =>
      problem === undefined ? Effect.void : Effect.logWarning(`gateway: run ${runId}: ${problem}: its held request's card could not be posted to a chat thread; roster approvals and the web list it`)),
    Effect.map(({ context: ctx }): ChatPlace | undefined => {
      if (ctx?.surface === "chat-session" && ctx.chat) return ctx.chat
      const to = ctx?.reply_to ? parseReplyTo(ctx.reply_to) : undefined
      return to?._tag === "chat" ? { provider: to.provider, channel: to.channel, ...(to.thread ? { thread: to.thread } : {}) } : undefined
    })
  )

/**
 * A hold decided where a chat session's people are (or a task's, answering in a chat thread): a
 * card in that thread once it is held, edited to how it ended. A card that cannot be posted is
 * said; the request still waits for `roster approvals` and the web.
 */
type CardEnv = Effect.Effect.Context<ReturnType<typeof postApprovalCard>>

const withCard = <R>(
  worker: string,
  runId: string,
  hold: (onHeld: ((view: PendingApproval) => Effect.Effect<CardPlace | undefined, never, CardEnv>) | undefined) => Effect.Effect<HoldEnd, never, R>,
  lastWords: (end: HoldEnd) => string
) =>
  Effect.gen(function*() {
    const place = yield* approvalPlace(worker, runId)
    if (!place) return yield* hold(undefined)
    const card = yield* Ref.make<ApprovalCard | undefined>(undefined)
    const end = yield* hold((view) =>
      postApprovalCard(place, view).pipe(
        Effect.timeout("10 seconds"),
        Effect.tap((c) => Ref.set(card, c)),
        Effect.map((c) => c?.at),
        Effect.catchAllCause((c) =>
          Effect.logWarning(`gateway: held request ${view.id} could not be posted to its chat thread (roster approvals still decides it)`, c).pipe(Effect.as(undefined))
        )
      )
    )
    const posted = yield* Ref.get(card)
    if (posted) {
      yield* closeApprovalCard(posted, lastWords(end)).pipe(
        Effect.catchAll((e) => Effect.logWarning(`gateway: a held request's card in ${e.where} could not be updated: ${e.detail}`))
      )
    }
    return end
  })

const DECIDED = { once: "approved once", run: "approved for the rest of the run", always: "approved for good ([[allow]] in org.toml)", deny: "denied (403)" } as const

/** The card's last words: how the hold ended, and who decided (where: slack:<user>, a CLI user, the web). */
const cardEnd = (asked: AskedFor, host: string, port: number, worker: string, wait: number, end: HoldEnd) => {
  const what = `[roster] ${asked.method} ${host}:${port}${asked.path ?? ""} for ${worker}`
  switch (end._tag) {
    case "decided":
      return `${what}: ${DECIDED[end.decided.decision]} by ${end.decided.by}.`
    case "timeout":
      return `${what}: no one decided within ${wait} s, so it was refused (403).`
    case "gone":
      return `${what}: not decided — it was held until ${end.why}.`
    case "full":
      return `${what}: not held (${end.why}).`
  }
}

/** Completes when the box ends its side of a connection (its FIN, an error, a close). */
export const socketEnded = (socket: Duplex) =>
  Effect.async<void>((resume) => {
    if (socket.destroyed || socket.readableEnded) return resume(Effect.void)
    const done = () => resume(Effect.void)
    socket.once("end", done)
    socket.once("close", done)
    socket.once("error", done)
    return Effect.sync(() => {
      socket.off("end", done)
      socket.off("close", done)
      socket.off("error", done)
    })
  })
