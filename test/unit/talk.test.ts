import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Logger, Ref } from "effect"
import { Runner } from "../../src/runner/Runner.js"
import { RunnerCalls } from "../../src/testing.js"
import { makeConversations } from "../../src/web/talk.js"
import { Paths } from "../../src/config/Paths.js"
import { eventually, tempPaths } from "../support/harness.js"

/** A deployment with no daemon running: the Talk page runs its sessions in its own process, through the Runner. */
const noDaemon = Layer.merge(NodeContext.layer, Layer.suspend(() => Paths.layerAt(tempPaths())))

describe("the Talk page's conversations (the Runner's test layer: no engine)", () => {
  it.effect("a session that dies of a bug is logged, and its conversation ends saying so, not silently", () => {
    const logged: Array<string> = []
    const logger = Logger.make(({ cause, message }) => void logged.push(`${String(message)} ${cause._tag === "Empty" ? "" : String(cause)}`))
    return Effect.gen(function*() {
      const { c, session } = yield* makeConversations().start("alice")
      // Run as the web server runs it (a fiber no one awaits): it must end on its own, having said why.
      expect(Exit.isSuccess(yield* Effect.exit(session))).toBe(true)
      expect(c.state).toBe("ended")
      expect(c.ended).toBe("error")
      expect(c.said.at(-1)?.text).toBe("the session failed unexpectedly (the web server's log says why)")
      expect(logged.some((l) => l.includes("the Talk session with alice failed unexpectedly") && l.includes("engine exploded"))).toBe(true)
    }).pipe(
      Effect.provide(Runner.layerTest({ session: () => Effect.die(new Error("engine exploded")) })),
      Effect.provide(noDaemon),
      Effect.provide(Logger.replace(Logger.defaultLogger, logger))
    )
  })

  it.live("what a person says is a turn of the conversation's session (a web session of that worker), its answer shown; ending it ends the session", () =>
    Effect.gen(function*() {
      const talk = makeConversations()
      const { c, session } = yield* talk.start("alice")
      const fiber = yield* Effect.fork(session)
      yield* eventually(Effect.sync(() => c.state === "ready"), "the session ready")
      expect(yield* talk.say(c, "hello there", "web:admin")).toBe(true)
      yield* eventually(Effect.sync(() => c.said.some((s) => s.kind === "worker")), "an answer")
      expect(c.said.map((s) => [s.who, s.kind, s.text])).toEqual([["web:admin", "you", "hello there"], ["alice", "worker", "(scripted) hello there"]])
      yield* talk.end(c)
      yield* Fiber.join(fiber)
      expect(c).toMatchObject({ state: "ended", ended: "closed", turns: 1 })
      const calls = yield* Ref.get(yield* RunnerCalls)
      expect(calls.map((x) => x._tag === "session" ? [x.req.worker, x.req.surface] : x._tag)).toEqual([["alice", "web-session"]])
      // Said after the end: nothing is taken.
      expect(yield* talk.say(c, "anyone?", "web:admin")).toBe(false)
    }).pipe(Effect.provide(Layer.fresh(Runner.layerTest())), Effect.provide(noDaemon)))
})
