import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Option, Scope } from "effect"
import { prepareWarm, warmFits } from "../../src/box/warmBox.js"
import { DockerFake, lockedNetwork } from "../../src/docker/DockerTest.js"
import { lockdownNetworkName } from "../../src/contract/deployment.js"
import { tempPaths, unitLayer, writeFixture } from "../support/harness.js"

/** A warm box of alice made on the Docker fake (its box waits), checked against a one-shot of hers. */
const warmAndCheck = (change: (fake: DockerFake["Type"], network: string) => Effect.Effect<void>) => {
  const paths = tempPaths()
  writeFixture({ paths })
  return Effect.gen(function*() {
    const warm = Option.getOrThrow(yield* prepareWarm("alice"))
    const fake = yield* DockerFake
    yield* change(fake, lockdownNetworkName(paths.config))
    const fits = yield* warmFits(warm, warm.shape, {})
    yield* Scope.close(warm.scope, Exit.void)
    return fits
  }).pipe(Effect.provide(unitLayer(paths, { docker: { script: () => ({ hang: true }) } })))
}

describe("a warm box's lockdown is checked again at its claim (the Docker fake)", () => {
  it.effect("unchanged: it fits the run", () =>
    Effect.gen(function*() {
      expect(Option.isSome(yield* warmAndCheck(() => Effect.void))).toBe(true)
    }))

  it.effect("its locked network made again since (another id) or no longer internal: recycled, not taken", () =>
    Effect.gen(function*() {
      const remade = yield* warmAndCheck((fake, name) =>
        Effect.sync(() => {
          const net = fake.networks.get(name)!
          fake.networks.set(name, { ...net, id: "remade0123456789" })
        }))
      expect(Option.isNone(remade)).toBe(true)
      const opened = yield* warmAndCheck((fake, name) =>
        Effect.sync(() => {
          const net = fake.networks.get(name)!
          fake.networks.set(name, lockedNetwork({ ...net, internal: false }))
        }))
      expect(Option.isNone(opened)).toBe(true)
    }))
})
