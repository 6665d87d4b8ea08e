import { NodeContext } from "@effect/platform-node"
import { SystemError } from "@effect/platform/Error"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Files } from "../../src/fs/Files.js"
import { nestedRepos } from "../../src/knowledge/nestedRepos.js"

describe("the folders of a clone git cannot take (issue 64.7)", () => {
  it.effect("a repository of its own is named; a folder that cannot be listed fails the look (the run's end keeps the clone), never read as empty", () => {
    const clone = fs.mkdtempSync(path.join(os.tmpdir(), "roster-clone-"))
    fs.mkdirSync(path.join(clone, ".git"))
    fs.mkdirSync(path.join(clone, "vendor", "lib", ".git"), { recursive: true })
    fs.mkdirSync(path.join(clone, "secret", "deep"), { recursive: true })
    fs.writeFileSync(path.join(clone, "secret", "deep", "work.txt"), "unlanded work")
    return Effect.gen(function*() {
      expect(yield* nestedRepos(clone)).toEqual(["vendor/lib"])
      const files = yield* Files
      const refusing = {
        ...files,
        list: (dir: string) =>
          dir.endsWith(`${path.sep}secret`)
            ? Effect.fail(new SystemError({ reason: "PermissionDenied", module: "FileSystem", method: "readDirectory", pathOrDescriptor: dir }))
            : files.list(dir)
      }
      const failed = yield* nestedRepos(clone).pipe(Effect.provideService(Files, refusing), Effect.flip)
      expect(failed.message).toContain(path.join(clone, "secret"))
    }).pipe(Effect.provide(Files.layer), Effect.provide(NodeContext.layer))
  })
})
