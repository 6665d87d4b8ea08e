import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Option, TestClock } from "effect"
import { ApprovalBoard, BoardSilent, type BoardDecision } from "../../src/contract/ApprovalBoard.js"
import type { PendingApproval } from "../../src/contract/approval.js"
import { makeApprovals } from "../../src/gateway/base/approvals.js"
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
    decide: (id, d) => answer(() => (posted.has(id) && !decided.has(id) ? (decided.set(id, d), Option.some(posted.get(id)!)) : Option.none()))
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
