import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, FiberSet } from "effect"
import * as fs from "node:fs"
import { layout } from "../../src/config/Paths.js"
import { runFiles } from "../../src/contract/runFiles.js"
import { makeUsageNotes } from "../../src/gateway/base/usageNotes.js"
import { RunLog } from "../../src/run/RunLog.js"
import type { LedgerEntry, SpendLedger } from "../../src/spend/SpendLedger.js"
import { tempPaths, unitLayer, writeFixture } from "../support/harness.js"

const RUN_A = "2026-12-03-10-00-00-000000a1"
const RUN_B = "2026-12-03-10-00-00-000000b1"
const entry = (runId: string, input: number): LedgerEntry => ({
  time: "2026-12-03T10:00:00.000Z", run_id: runId, worker: "alice", model: "claude-test", input, output: 2, cache_read: 0, cache_write: 0, usd: 0.001, priced: true
})

describe("a gateway's usage notes", () => {
  it.effect("notes submitted together are written by one fiber: every ledger line, each run's usage events in one append in order, then each note's `then`", () => {
    const paths = tempPaths()
    writeFixture({ paths })
    const eventsOf = (runId: string) => runFiles(layout(paths).runDir("alice", runId)).events
    const usageLines = (runId: string) =>
      fs.readFileSync(eventsOf(runId), "utf8").trim().split("\n").map((l) => JSON.parse(l) as { kind: string; input?: number }).filter((e) => e.kind === "usage")
    return Effect.gen(function*() {
      const runLog = yield* RunLog
      for (const runId of [RUN_A, RUN_B]) yield* runLog.start({ runId, worker: "alice", kind: "box" })
      const persisted: Array<number> = []
      // The ledger's own writing is SpendLedger's (tested there); here only what it is given, and when.
      const ledger = { persist: (e: LedgerEntry) => Effect.sync(() => void persisted.push(e.input)) } as unknown as SpendLedger["Type"]
      const run = yield* FiberSet.makeRuntime<RunLog>()
      const forks: Array<number> = []
      const notes = makeUsageNotes<RunLog>(ledger, (work) => {
        forks.push(1)
        run(work)
      })
      const done = yield* Deferred.make<ReadonlyArray<number>>()
      notes.submit({ entry: entry(RUN_A, 1), then: undefined })
      notes.submit({ entry: entry(RUN_B, 2), then: undefined })
      notes.submit({ entry: entry(RUN_A, 3), then: undefined })
      // Runs after the usage above is written: it sees all of run A's.
      notes.submit({ entry: undefined, then: Effect.suspend(() => Deferred.succeed(done, usageLines(RUN_A).map((e) => e.input ?? -1))) })
      // Nothing to note: no write, no fiber.
      notes.submit({ entry: undefined, then: undefined })
      const seenByThen = yield* Deferred.await(done)
      expect(seenByThen).toEqual([1, 3])
      expect(persisted).toEqual([1, 2, 3])
      expect(usageLines(RUN_B).map((e) => e.input)).toEqual([2])
      expect(forks.length).toBe(1)
      // A note for a run with no record is logged, not thrown, and the notes after it are still written.
      const later = yield* Deferred.make<void>()
      notes.submit({ entry: entry("2026-12-03-10-00-00-0000dead", 9), then: undefined })
      notes.submit({ entry: entry(RUN_B, 4), then: Deferred.succeed(later, undefined) })
      yield* Deferred.await(later)
      expect(usageLines(RUN_B).map((e) => e.input)).toEqual([2, 4])
      expect(persisted).toEqual([1, 2, 3, 9, 4])
    }).pipe(Effect.scoped, Effect.provide(unitLayer(paths)))
  })
})
