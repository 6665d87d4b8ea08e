import { Path } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { Effect } from "effect"
import { Files } from "../fs/Files.js"

/**
 * The folders of a clone that are git repositories of their own (a `.git` folder or file below
 * the top): `git add` cannot take their files (it fails on one with no commit, and records only a
 * commit id for one with commits, whose objects the canonical repo never gets). Found without
 * following a symlink; the clone's own `.git` is not looked into. A folder that cannot be listed
 * fails the look (git could not take it either): the run's end then keeps the clone for a person
 * rather than delete work no one saw.
 */
export const nestedRepos = Effect.fn("knowledge.nestedRepos")(function*(clone: string) {
  const files = yield* Files
  const path = yield* Path.Path
  const found: Array<string> = []
  const walk = (rel: string): Effect.Effect<void, PlatformError> =>
    Effect.gen(function*() {
      const entries = yield* files.list(rel === "" ? clone : path.join(clone, rel))
      if (rel !== "" && entries.some((e) => e.name === ".git")) return void found.push(rel)
      for (const e of entries) {
        if (e.kind !== "directory" || (rel === "" && e.name === ".git")) continue
        yield* walk(rel === "" ? e.name : `${rel}/${e.name}`)
      }
    })
  yield* walk("")
  return found
})
