import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import * as fs from "node:fs"
import { ImageStore } from "../../src/box/docker/ImageStore.js"
import { layout } from "../../src/config/Paths.js"
import { DockerFake, fakeImage } from "../../src/docker/DockerTest.js"
import { tempPaths, unitLayer } from "../support/harness.js"

const REF = "registry.example.test/roster/box:1"

describe("the box image", () => {
  it.effect("ten concurrent ensures of a missing registry image make one pull", () => {
    const paths = tempPaths()
    return Effect.gen(function*() {
      const images = yield* ImageStore
      yield* Effect.all(Array.from({ length: 10 }, () => images.ensure(REF)), { concurrency: "unbounded" })
      expect(yield* (yield* DockerFake).callsOf("imagePull")).toEqual([REF])
      const pulls = JSON.parse(fs.readFileSync(layout(paths).imagePulls, "utf8"))
      expect(typeof pulls[REF]).toBe("number")
    }).pipe(Effect.provide(unitLayer(paths, { docker: { images: {}, pullDelay: Effect.promise(() => new Promise((r) => setTimeout(r, 30))) } })))
  })

  it.effect("a bare local tag is never pulled; missing, the error names roster box build", () => {
    const paths = tempPaths()
    return Effect.gen(function*() {
      const exit = yield* Effect.exit((yield* ImageStore).ensure("roster-box:2"))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(String(Exit.isFailure(exit) ? exit.cause : "")).toContain("roster box build")
      expect(yield* (yield* DockerFake).callsOf("imagePull")).toEqual([])
    }).pipe(Effect.provide(unitLayer(paths, { docker: { images: {} } })))
  })

  it.live("a registry image pulled within 24 h is not pulled again; an older one is", () => {
    const paths = tempPaths()
    fs.mkdirSync(paths.state, { recursive: true })
    return Effect.gen(function*() {
      const now = Date.now()
      fs.writeFileSync(layout(paths).imagePulls, JSON.stringify({ [REF]: now - 60_000, "r.test/old:1": now - 25 * 3600_000 }))
      const images = yield* ImageStore
      yield* images.ensure(REF)
      yield* images.ensure("r.test/old:1")
      expect(yield* (yield* DockerFake).callsOf("imagePull")).toEqual(["r.test/old:1"])
    }).pipe(
      Effect.provide(unitLayer(paths, { docker: { images: { [REF]: fakeImage(), "r.test/old:1": fakeImage() } } }))
    )
  })

  it.effect("an offline registry with a local copy is a note, without one an error", () => {
    const paths = tempPaths()
    return Effect.gen(function*() {
      const images = yield* ImageStore
      yield* images.ensure(REF, { force: true })
      const exit = yield* Effect.exit(images.ensure("r.test/absent:1"))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(String(Exit.isFailure(exit) ? exit.cause : "")).toContain("no local copy")
    }).pipe(Effect.provide(unitLayer(paths, { docker: { images: { [REF]: fakeImage() }, pull: "offline" } })))
  })
})
