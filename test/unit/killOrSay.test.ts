import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Logger } from "effect"
import { BoxBackend } from "../../src/backend/BoxBackend.js"
import { killOrSay } from "../../src/backend/killOrSay.js"
import { DockerError } from "../../src/docker/Docker.js"

/** A backend whose kill answers as `kill` says (the rest of it is not reached). */
const backendKilling = (kill: BoxBackend["Type"]["kill"]) => Layer.succeed(BoxBackend, { kill } as unknown as BoxBackend["Type"])

describe("a kill nothing waits on (the reaper, a cancel, a take-over)", () => {
  it.effect("one the engine refuses is said, with the box and the command that kills it; an absent box says nothing", () => {
    const logged: Array<string> = []
    const logger = Logger.make(({ message }) => void logged.push(String(message)))
    return Effect.gen(function*() {
      yield* killOrSay("c0ffee", "run r1 of alice (past its ceiling)").pipe(
        Effect.provide(backendKilling(() => Effect.fail(new DockerError({ operation: "kill", detail: "engine busy", statusCode: 500 }))))
      )
      expect(logged).toHaveLength(1)
      expect(logged[0]).toContain("run r1 of alice (past its ceiling)")
      expect(logged[0]).toContain("docker kill c0ffee")
      yield* killOrSay("c0ffee", "gone already").pipe(Effect.provide(backendKilling(() => Effect.succeed(false))))
      expect(logged).toHaveLength(1)
    }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
  })
})
