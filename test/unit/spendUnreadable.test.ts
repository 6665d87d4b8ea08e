import { describe, expect, it } from "@effect/vitest"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Effect, Layer, Option } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { layout, Paths } from "../../src/config/Paths.js"
import { Files } from "../../src/fs/Files.js"
import { budgetText, overAtStart } from "../../src/gateway/metering/meter.js"
import { SpendLedger } from "../../src/spend/SpendLedger.js"
import { tempPaths } from "../support/harness.js"

const RUN = "2026-12-07-10-00-00-0000a0a0"
const entry = (time: string, usd: number) =>
  JSON.stringify({ time, run_id: RUN, worker: "alice", model: "m", input: 10, output: 10, cache_read: 0, cache_write: 0, usd, priced: true })

/** The ledger as a daemon builds it at its start, over this deployment's files. */
const ledger = (paths: ReturnType<typeof tempPaths>) => SpendLedger.layer.pipe(Layer.provide(Layer.mergeAll(NodeContext.layer, Files.layer, Paths.layerAt(paths))))

describe("a spend ledger day that cannot be read", () => {
  it.effect("closes every budget it feeds (a model call is refused, saying the fix) instead of re-opening them, at each start; with no budget set nothing is closed", () => {
    const paths = tempPaths()
    const dir = layout(paths).ledgerDir
    fs.mkdirSync(dir, { recursive: true })
    const today = new Date().toISOString().slice(0, 10)
    // Today's file is there and cannot be read (a directory in its place: root reads through permissions).
    fs.mkdirSync(path.join(dir, `${today}.jsonl`))
    fs.writeFileSync(path.join(dir, "2026-12-01.jsonl"), `${entry("2026-12-01T10:00:00.000Z", 0.5)}\n`)
    const startedAt = new Date().toISOString()
    const ask = Effect.gen(function*() {
      const spent = yield* (yield* SpendLedger).spent("alice", RUN, startedAt)
      return spent
    })
    return Effect.gen(function*() {
      // Twice, as after a restart: the day is read again, and is again unreadable.
      for (let start = 0; start < 2; start++) {
        const spent = yield* ask.pipe(Effect.provide(ledger(paths)))
        expect(spent.unreadable).toMatch(new RegExp(`the spend ledger's day ${today} could not be read`))
        const over = overAtStart({ limits: { worker_daily_usd: 100, on_cross: "cut" }, spent, startedAt })
        expect(over?.which).toBe("ledger_unreadable")
        expect(budgetText(over!, "alice")).toMatch(/^out of budget: .* so no budget can be checked — this run is stopped\. Fix or move aside that day's file/)
        // No budget set: the ledger feeds none, and nothing is closed.
        expect(overAtStart({ limits: { on_cross: "cut" }, spent, startedAt })).toBeUndefined()
      }
      // roster usage says the day is unreadable.
      const days = yield* Effect.flatMap(SpendLedger, (l) => l.unreadable!("2026-12-01")).pipe(Effect.provide(ledger(paths)))
      expect(days.map((d) => d.day)).toEqual([today])
      const sums = yield* Effect.flatMap(SpendLedger, (l) => l.usage("2026-12-01", Option.none())).pipe(Effect.provide(ledger(paths)))
      expect(sums.get("alice")?.usd).toBe(0.5)
    })
  })
})
