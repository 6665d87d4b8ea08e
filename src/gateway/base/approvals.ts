import { type Context, Deferred, Effect, Option, Ref } from "effect"
import * as crypto from "node:crypto"
import type { ApprovalDecision, CardPlace, PendingApproval } from "../../contract/approval.js"
import type { ApprovalBoard } from "../../contract/ApprovalBoard.js"

export type { ApprovalDecision, CardPlace, PendingApproval }

export interface Decided {
  readonly decision: ApprovalDecision
  /** Who decided (an OS user from the CLI, the web's person), for the audit line. */
  readonly by: string
  /** Where they decided it, when it was a chat card's button: its place and card, for the audit line. */
  readonly where?: string | undefined
}

export type Ask = Omit<PendingApproval, "id" | "asked_at" | "expires_at" | "node" | "card">

/** How many requests may be held at once: per run, and on this node in all. */
export interface HoldLimits {
  readonly perRun: number
  readonly total: number
}

/** How a hold ended: decided by a person, its wait ran out, its owner went (connection closed, run ended), or it was never held (a cap). */
export type HoldEnd =
  | { readonly _tag: "decided"; readonly decided: Decided }
  | { readonly _tag: "timeout" }
  | { readonly _tag: "gone"; readonly why: string }
  | { readonly _tag: "full"; readonly why: string }

type Board = Context.Tag.Service<ApprovalBoard>

/** How often a request held on a fleet node looks for a decision made on another. */
const BOARD_LOOK = "1 second"

/**
 * The gateway's held requests and what each run was let through for good. In memory: a held
 * request is a connection that waits, and both end with the daemon. On a fleet node each is also
 * posted to the fleet's board, so a person on any node sees it and decides it there.
 */
export const makeApprovals = (board?: Board) => {
  const pending = new Map<string, { view: PendingApproval; readonly answer: Deferred.Deferred<Decided> }>()
  const forRun = new Map<string, Set<string>>()
  const key = (host: string, port: number) => `${host}:${port}`
  /** With `card`, only the request whose card that is: a press decides the request on the card pressed. */
  const decide = (id: string, decided: Decided, card?: CardPlace) =>
    Effect.gen(function*() {
      const held = pending.get(id)
      if (!held) return Option.none<PendingApproval>()
      if (card !== undefined && !sameCard(held.view.card, card)) return Option.none<PendingApproval>()
      // The first decision wins: a second (a button pressed as the CLI decided) finds it taken.
      if (!(yield* Deferred.succeed(held.answer, decided))) return Option.none<PendingApproval>()
      if (decided.decision === "run" && held.view.rule === undefined) {
        const set = forRun.get(held.view.run_id) ?? new Set<string>()
        set.add(key(held.view.host, held.view.port))
        forRun.set(held.view.run_id, set)
      }
      return Option.some(held.view)
    })
  return {
    /**
     * Holds `ask` until someone decides, `waitMs` pass, or `gone` completes (the request's
     * connection closed, its run ended): the pending entry goes however it ends. Past `limits`
     * it is not held at all.
     */
    ask: <R, R2 = never>(
      ask: Ask,
      now: number,
      waitMs: number,
      limits: HoldLimits,
      gone: Effect.Effect<string, never, R>,
      /** Told once it is held (its id known): a chat thread's card with buttons, say — where it was posted, if it was. */
      onHeld?: (view: PendingApproval) => Effect.Effect<CardPlace | undefined, never, R2>
    ) =>
      Effect.gen(function*() {
        const ofRun = [...pending.values()].filter((p) => p.view.run_id === ask.run_id).length
        if (ofRun >= limits.perRun) {
          return { _tag: "full", why: `run ${ask.run_id} already has ${ofRun} requests held for a decision ([gateway] approvals_max_per_run = ${limits.perRun})` } satisfies HoldEnd
        }
        if (pending.size >= limits.total) {
          return { _tag: "full", why: `${pending.size} requests are already held for a decision on this node ([gateway] approvals_max = ${limits.total})` } satisfies HoldEnd
        }
        const id = `ap-${crypto.randomBytes(4).toString("hex")}`
        const answer = yield* Deferred.make<Decided>()
        const view: PendingApproval = {
          ...ask, id, asked_at: new Date(now).toISOString(), expires_at: new Date(now + waitMs).toISOString(), ...(board ? { node: board.node } : {})
        }
        const entry = { view, answer }
        pending.set(id, entry)
        // The board it is on, if it could be posted: a decision made there reaches it, and it leaves the board with it.
        const on = board && (yield* postTo(board, view)) ? board : undefined
        // Its card, once posted, is the one place a press decides it from (here and on the fleet's board).
        const placed = (card: CardPlace | undefined) =>
          card === undefined ? Effect.void : Effect.sync(() => {
            entry.view = { ...entry.view, card }
          }).pipe(Effect.zipRight(on ? placeOn(on, id, card) : Effect.void))
        // Told inside the hold's own race and time: a slow chat post neither outlives it nor leaves it listed.
        const decided = (onHeld ? Effect.flatMap(onHeld(view), placed) : Effect.void).pipe(
          Effect.zipRight(Deferred.await(answer)),
          Effect.race(on ? decidedElsewhere(on, id, (d) => decide(id, d)) : Effect.never),
          Effect.map((d): HoldEnd => ({ _tag: "decided", decided: d }))
        )
        return yield* Effect.raceFirst(decided, Effect.map(gone, (why): HoldEnd => ({ _tag: "gone", why }))).pipe(
          Effect.timeoutTo({ duration: waitMs, onTimeout: (): HoldEnd => ({ _tag: "timeout" }), onSuccess: (end) => end }),
          Effect.ensuring(Effect.sync(() => pending.delete(id)).pipe(Effect.zipRight(on ? takeDown(on, id) : Effect.void)))
        )
      }),
    list: Effect.sync(() => [...pending.values()].map((p) => p.view).sort((a, b) => a.asked_at.localeCompare(b.asked_at))),
    /** The held request, once found; its decision reaches its waiting connection. */
    find: (id: string) => Effect.sync(() => Option.fromNullable(pending.get(id)?.view)),
    decide,
    /** This run was let through to host:port for the rest of it (`--run`). */
    allowedForRun: (runId: string | null, host: string, port: number) => runId !== null && (forRun.get(runId)?.has(key(host, port)) ?? false)
  }
}
export type Approvals = ReturnType<typeof makeApprovals>

/** The same card: the same connection, channel, thread and message. */
export const sameCard = (a: CardPlace | undefined, b: CardPlace | undefined) =>
  a !== undefined && b !== undefined && a.provider === b.provider && a.connection === b.connection && a.channel === b.channel &&
  a.thread === b.thread && a.message === b.message

/** Its card noted on the board, or said why not: a press on another node then finds no card and decides nothing. */
const placeOn = (board: Board, id: string, card: CardPlace) =>
  board.placeCard(id, card).pipe(
    Effect.catchAll((e) => Effect.logWarning(`gateway: held request ${id}'s card is not on the fleet's board (${e.detail}): its buttons decide it only on this node`))
  )

/** Posted, or said why not: the request still waits for a decision made on this node. */
const postTo = (board: Board, view: PendingApproval) =>
  board.post(view).pipe(
    Effect.as(true),
    Effect.catchAll((e) =>
      Effect.logWarning(`gateway: held request ${view.id} is not on the fleet's board (${e.detail}): only this node can decide it`).pipe(Effect.as(false))
    )
  )

const takeDown = (board: Board, id: string) =>
  board.remove(id).pipe(Effect.catchAll((e) => Effect.logWarning(`gateway: held request ${id} stays on the fleet's board until its wait runs out (${e.detail})`)))

/**
 * Looks on the board for a decision made on another node, and applies it here: every second, and
 * at once when the deciding node says so (its runner RPC). Never ends by itself (the request's
 * own wait ends it). A board that does not answer is said once.
 */
const decidedElsewhere = (board: Board, id: string, apply: (d: Decided) => Effect.Effect<unknown>) =>
  Effect.gen(function*() {
    const said = yield* Ref.make(false)
    const look = board.decisionOf(id).pipe(
      Effect.flatMap(Option.match({ onNone: () => Effect.void, onSome: (d) => Effect.asVoid(apply(d)) })),
      Effect.catchAll((e) =>
        Ref.getAndSet(said, true).pipe(Effect.flatMap((was) =>
          was ? Effect.void : Effect.logWarning(`gateway: the fleet's board does not answer for held request ${id} (${e.detail}); looking again`)))
      )
    )
    return yield* Effect.forever(Effect.gen(function*() {
      // Taken before the look: a nudge that comes while it reads is not missed.
      const nudged = yield* board.nextNudge
      yield* look
      yield* Effect.race(Effect.sleep(BOARD_LOOK), nudged)
    }))
  })
