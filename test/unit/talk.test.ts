import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Logger } from "effect"
import { makeConversations } from "../../src/web/talk.js"
import { tempPaths, unitLayer, writeFixture } from "../support/harness.js"

describe("the Talk page's conversations (Docker test layer)", () => {
  it.effect("a session that dies of a bug is logged, and its conversation ends saying so, not silently", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    // The engine breaks (a bug, not an engine error) as the session's box is created.
    const layer = unitLayer(paths, { docker: { before: (op) => (op === "containerCreate" ? Effect.die(new Error("engine exploded")) : Effect.void) } })
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
    }).pipe(Effect.provide(layer), Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
  })
})
