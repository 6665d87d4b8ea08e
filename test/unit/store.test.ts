import { describe, expect, it } from "@effect/vitest"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { aptMirror } from "../../src/image/build/mirror.js"
import { provisionStore, snapshotInfos, snapshotStore } from "../../src/box/store.js"
import { restoreStore, sweepStores } from "../../src/supervisor/storeCare.js"
import { layout } from "../../src/config/Paths.js"
import { tempPaths, unitLayer, writeFixture } from "../support/harness.js"

describe("store snapshots after a run", () => {
  it.effect("taken only when the store changed, counted, the oldest pruned beyond keep, symlinks never followed", () => {
    const paths = tempPaths()
    const files = layout(paths)
    const secret = path.join(paths.home, "host-secret")
    fs.writeFileSync(secret, "HOST-ONLY")
    return Effect.gen(function*() {
      const store = yield* provisionStore("alice")
      expect(yield* snapshotStore("alice", "2026-01-01-00-00-01-00000001", 2)).toBeUndefined() // empty store
      fs.writeFileSync(path.join(store, "notes.txt"), "one")
      fs.symlinkSync(secret, path.join(store, "link"))
      const first = yield* snapshotStore("alice", "2026-01-01-00-00-02-00000002", 2)
      expect(first?.changes).toBe(2)
      expect(fs.readlinkSync(path.join(first?.dir ?? "", "store", "link"))).toBe(secret)
      expect(fs.readFileSync(path.join(first?.dir ?? "", "manifest.json"), "utf8")).not.toContain("HOST-ONLY")
      expect(yield* snapshotStore("alice", "2026-01-01-00-00-03-00000003", 2)).toBeUndefined() // unchanged
      fs.writeFileSync(path.join(store, "notes.txt"), "two")
      expect((yield* snapshotStore("alice", "2026-01-01-00-00-04-00000004", 2))?.changes).toBe(1)
      fs.writeFileSync(path.join(store, "more.txt"), "three")
      yield* snapshotStore("alice", "2026-01-01-00-00-05-00000005", 2)
      expect(fs.readdirSync(files.snapshotsDir("alice")).sort()).toEqual(["2026-01-01-00-00-04-00000004", "2026-01-01-00-00-05-00000005"])
      expect(yield* snapshotStore("alice", "2026-01-01-00-00-06-00000006", 0)).toBeUndefined() // keep 0: none
    }).pipe(Effect.provide(unitLayer(paths)))
  })
})

describe("store list, restore and the daemon's sweep", () => {
  it.effect("lists snapshots with time, run and changes; a restore round-trips and is itself undoable; a .partial is never one", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const files = layout(paths)
    return Effect.gen(function*() {
      const store = yield* provisionStore("alice")
      fs.writeFileSync(path.join(store, "notes.txt"), "version one")
      yield* snapshotStore("alice", "2026-11-29-10-00-00-0000000a", 5)
      fs.writeFileSync(path.join(store, "notes.txt"), "version two")
      fs.writeFileSync(path.join(store, "extra.txt"), "added later")
      yield* snapshotStore("alice", "2026-11-29-10-05-00-0000000b", 5)
      fs.mkdirSync(path.join(files.snapshotsDir("alice"), "2026-11-29-10-06-00-0000000c.partial"))
      const infos = yield* snapshotInfos("alice")
      expect(infos.map((i) => [i.id, i.run_id, i.changes])).toEqual([
        ["2026-11-29-10-00-00-0000000a", "2026-11-29-10-00-00-0000000a", 1],
        ["2026-11-29-10-05-00-0000000b", "2026-11-29-10-05-00-0000000b", 2]
      ])
      expect(infos[0]?.time).toMatch(/^\d{4}-\d{2}-\d{2}T/)

      fs.writeFileSync(path.join(store, "notes.txt"), "a bad run wrote this")
      const done = yield* restoreStore("alice", "2026-11-29-10-00-00-0000000a")
      expect(fs.readFileSync(path.join(store, "notes.txt"), "utf8")).toBe("version one")
      expect(fs.existsSync(path.join(store, "extra.txt"))).toBe(false)
      // The store it replaced was kept: restoring that undoes the restore.
      const saved = done.saved?.split("/").at(-1) ?? ""
      expect(saved).toMatch(/-restore(-\d+)?$/)
      yield* restoreStore("alice", saved)
      expect(fs.readFileSync(path.join(store, "notes.txt"), "utf8")).toBe("a bad run wrote this")
      expect(fs.readdirSync(path.dirname(store)).filter((n) => n.startsWith("alice."))).toEqual([])

      const unknown = yield* restoreStore("alice", "nope").pipe(Effect.flip)
      expect(unknown.message).toBe(`alice has no snapshot "nope": list them with roster store list alice`)
    }).pipe(Effect.provide(unitLayer(paths)))
  })

  it.effect("the sweep snapshots a store changed outside a run, once", () => {
    const paths = tempPaths()
    writeFixture({ paths, workers: ["alice", "bob"] })
    return Effect.gen(function*() {
      const store = yield* provisionStore("alice")
      fs.writeFileSync(path.join(store, "edited-on-the-host.txt"), "hi")
      expect(yield* sweepStores).toEqual(["alice"])
      expect(yield* sweepStores).toEqual([])
      const [only] = yield* snapshotInfos("alice")
      expect(only).toMatchObject({ run_id: null, changes: 1 })
      expect(only?.id).toMatch(/^\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}-sweep(-\d+)?$/)
    }).pipe(Effect.provide(unitLayer(paths)))
  })
})

describe("the offline builder's mirror", () => {
  it("comes from this machine's apt configuration: deb822 first match, one-line lists, disabled stanzas skipped", async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "roster-apt-"))
    fs.mkdirSync(path.join(root, "sources.list.d"))
    fs.writeFileSync(path.join(root, "sources.list.d", "a.sources"), [
      "Types: deb", "URIs: http://disabled.example/debian", "Suites: bookworm", "Components: main", "Enabled: no", "",
      "Types: deb", "# URIs: http://commented.example/debian", "URIs: http://mirror.example/debian", "Suites: bookworm bookworm-updates", "Components: main contrib", ""
    ].join("\n"))
    const mirror = (suite: string) => Effect.runPromise(aptMirror(suite, root).pipe(Effect.provide(NodeContext.layer)))
    expect(await mirror("bookworm")).toBe("http://mirror.example/debian")
    fs.writeFileSync(path.join(root, "sources.list"), "deb [arch=amd64] http://list.example/debian bookworm main\n")
    expect(await mirror("bookworm")).toBe("http://list.example/debian")
    expect(await mirror("trixie")).toBeUndefined()
  })
})
