import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Logger } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { NodeContext } from "@effect/platform-node"
import { layout, Paths } from "../../src/config/Paths.js"
import { approvalPlace } from "../../src/gateway/egress/approve.js"
import { tempPaths } from "../support/harness.js"

const RUN = "2026-12-08-02-00-00-0000abcd"

describe("where a held request's card goes (issue 64.3)", () => {
  it.effect("a run context that cannot be read: no card, a log line saying so and where the request is decided; none at all is no card and nothing to say", () => {
    const paths = tempPaths()
    const logged: Array<string> = []
    const logger = Logger.make(({ message }) => void logged.push(String(message)))
    const file = layout(paths).contextFile("alice", RUN)
    return Effect.gen(function*() {
      expect(yield* approvalPlace("alice", RUN)).toBeUndefined()
      expect(logged).toEqual([])
      fs.mkdirSync(path.dirname(file), { recursive: true })
      fs.writeFileSync(file, "{\"surface\": \"chat-session\", \"chat\": ")
      expect(yield* approvalPlace("alice", RUN)).toBeUndefined()
      expect(logged).toEqual([
        `gateway: run ${RUN}: ${file} is there and cannot be read as a run context: its held request's card could not be posted to a chat thread; roster approvals and the web list it`
      ])
    }).pipe(Effect.provide(Layer.mergeAll(NodeContext.layer, Paths.layerAt(paths))), Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
  })
})
