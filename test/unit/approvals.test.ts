import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Option, TestClock } from "effect"
import { ApprovalBoard, BoardSilent, type BoardDecision } from "../../src/contract/ApprovalBoard.js"
import { type CardPlace, type PendingApproval, pressRefusal } from "../../src/contract/approval.js"
import { makeApprovals, sameCard } from "../../src/gateway/base/approvals.js"
import { makeNudge, never, type Nudge } from "../../src/fleet/rpc/nudge.js"

const LIMITS = { perRun: 8, total: 64 }
const ask = { run_id: "2026-12-03-13-00-00-0000ffff", worker: "alice", subject: "box", method: "CONNECT", host: "held.example.test", port: 443, path: null }

/** A board in memory; `down` makes every call fail as a database that does not answer would. */
const boardInMemory = (down = false, nudges: Nudge = never) => {
  const posted = new Map<string, PendingApproval>()
  const decided = new Map<string, BoardDecision>()
  const answer = <A>(f: () => A) => (down ? Effect.fail(new BoardSilent({ detail: "down (test)" })) : Effect.sync(f))
  const board = ApprovalBoard.of({
    node: "n1",
    post: (held) => answer(() => void posted.set(held.id, held)),
    decisionOf: (id) => answer(() => Option.fromNullable(decided.get(id))),
    remove: (id) => answer(() => void posted.delete(id)),
    waiting: answer(() => [...posted.values()].filter((p) => !decided.has(p.id))),
    nextNudge: nudges.next,
    placeCard: (id, card) => answer(() => void (posted.has(id) && posted.set(id, { ...posted.get(id)!, card }))),
    decide: (id, d, card) =>
      answer(() =>
        posted.has(id) && !decided.has(id) && (card === undefined || sameCard(posted.get(id)?.card, card))
          ? (decided.set(id, d), Option.some(posted.get(id)!))
          : Option.none()
      )
  })
  return { board, posted }
}

describe("held requests on a fleet node", () => {
  it.effect("are posted with their node, take a decision made elsewhere within a look, and leave the board", () =>
    Effect.gen(function*() {
      const { board, posted } = boardInMemory()
      const approvals = makeApprovals(board)
      const waiting = yield* Effect.fork(approvals.ask(ask, 0, 60_000, LIMITS, Effect.never))
      yield* TestClock.adjust("10 millis")
      const [held] = [...posted.values()]
      expect(held?.node).toBe("n1")
      yield* board.decide(held!.id, { decision: "once", by: "a person on n2" })
      yield* TestClock.adjust("1 second")
      expect(yield* Fiber.join(waiting)).toEqual({ _tag: "decided", decided: { decision: "once", by: "a person on n2" } })
      expect(posted.size).toBe(0)
    }))

  it.effect("a nudge from the deciding node (its runner RPC) makes the holding node look at once, not at its next look", () =>
    Effect.gen(function*() {
      const nudges = yield* makeNudge
      const { board, posted } = boardInMemory(false, nudges)
      const waiting = yield* Effect.fork(makeApprovals(board).ask(ask, 0, 60_000, LIMITS, Effect.never))
      yield* TestClock.adjust("10 millis")
      const [held] = [...posted.values()]
      yield* board.decide(held!.id, { decision: "run", by: "a person on n2" })
      yield* nudges.nudge
      // Well inside the second between two looks: only the nudge can have brought the decision.
      yield* TestClock.adjust("10 millis")
      expect(Option.isSome(yield* Fiber.poll(waiting))).toBe(true)
      expect(yield* Fiber.join(waiting)).toEqual({ _tag: "decided", decided: { decision: "run", by: "a person on n2" } })
    }))

  it.effect("without a nudge the decision waits for the next look", () =>
    Effect.gen(function*() {
      const { board, posted } = boardInMemory(false, yield* makeNudge)
      const waiting = yield* Effect.fork(makeApprovals(board).ask(ask, 0, 60_000, LIMITS, Effect.never))
      yield* TestClock.adjust("10 millis")
      yield* board.decide([...posted.values()][0]!.id, { decision: "once", by: "a person on n2" })
      yield* TestClock.adjust("10 millis")
      expect(Option.isNone(yield* Fiber.poll(waiting))).toBe(true)
      yield* TestClock.adjust("1 second")
      expect(yield* Fiber.join(waiting)).toEqual({ _tag: "decided", decided: { decision: "once", by: "a person on n2" } })
    }))

  it.effect("a board that does not answer leaves the request to this node: listed and decided here", () =>
    Effect.gen(function*() {
      const approvals = makeApprovals(boardInMemory(true).board)
      const waiting = yield* Effect.fork(approvals.ask(ask, 0, 60_000, LIMITS, Effect.never))
      yield* TestClock.adjust("10 millis")
      const [held] = yield* approvals.list
      expect(held?.host).toBe("held.example.test")
      yield* approvals.decide(held!.id, { decision: "deny", by: "a person here" })
      expect(yield* Fiber.join(waiting)).toEqual({ _tag: "decided", decided: { decision: "deny", by: "a person here" } })
    }))

  it.effect("no decision anywhere in time: none, and the board is cleared", () =>
    Effect.gen(function*() {
      const { board, posted } = boardInMemory()
      const waiting = yield* Effect.fork(makeApprovals(board).ask(ask, 0, 5_000, LIMITS, Effect.never))
      yield* TestClock.adjust("6 seconds")
      expect(yield* Fiber.join(waiting)).toEqual({ _tag: "timeout" })
      expect(posted.size).toBe(0)
    }))
})

describe("a held request is bound to its card: a press decides it only from there", () => {
  const card: CardPlace = { provider: "slack", connection: "slack", channel: "C0B", thread: "10.1", message: "10.2" }
  const press = { provider: "slack" as const, connection: "slack", channel: "C0B", thread: "10.1", message: "10.2" }

  it("the card's own button, in its channel and thread, on its connection; anything else is refused with why", () => {
    expect(pressRefusal(card, press)).toBeUndefined()
    // Channel ids are the service's, compared as org.toml's channel lookups are.
    expect(pressRefusal(card, { ...press, channel: "c0b" })).toBeUndefined()
    for (const other of [
      { ...press, channel: "C0A" }, // an approver of another channel, pressing with this request's id
      { ...press, message: "11.1" }, // another card's button, the id in its value forged
      { ...press, message: undefined },
      { ...press, thread: "12.1" },
      { ...press, connection: "slack-other" }, // the same channel id on another workspace's connection
      { ...press, provider: "discord" as const }
    ]) expect(pressRefusal(card, other), JSON.stringify(other)).toMatch(/not on this request's card/)
    // A request whose card was never posted is decided only with roster approve or the web.
    expect(pressRefusal(undefined, press)).toMatch(/no card/)
  })

  it.effect("its card, once posted, is on its view and the board's; a decision that names another card decides nothing", () =>
    Effect.gen(function*() {
      const { board, posted } = boardInMemory()
      const approvals = makeApprovals(board)
      const waiting = yield* Effect.fork(approvals.ask(ask, 0, 60_000, LIMITS, Effect.never, () => Effect.succeed(card)))
      yield* TestClock.adjust("10 millis")
      const [held] = yield* approvals.list
      expect(held?.card).toEqual(card)
      expect(posted.get(held!.id)?.card).toEqual(card)
      const decided = { decision: "once" as const, by: "slack:U0B", where: "slack channel C0B" }
      expect(Option.isNone(yield* approvals.decide(held!.id, decided, { ...card, channel: "C0A" }))).toBe(true)
      expect(Option.isNone(yield* board.decide(held!.id, decided, { ...card, message: "11.1" }))).toBe(true)
      expect(Option.isNone(yield* Fiber.poll(waiting))).toBe(true)
      expect(Option.isSome(yield* approvals.decide(held!.id, decided, card))).toBe(true)
      expect(yield* Fiber.join(waiting)).toEqual({ _tag: "decided", decided })
    }))
})
