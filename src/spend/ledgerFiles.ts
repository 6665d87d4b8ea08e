import { FileSystem, Path } from "@effect/platform"
import { Effect, Option, Schema } from "effect"
import { Paths, layout } from "../config/Paths.js"
import { foldLinesIn } from "../fs/lines.js"
import { LedgerEntry, type UnreadableDay, type UsageSum } from "./entry.js"
import { isNotFound } from "../fs/notFound.js"

/** How far back the ledger is read at start: a run's spending counts across days, a run lasts less than this. */
const DAYS_KEPT_IN_MEMORY = 7
const decodeLine = Schema.decodeUnknownOption(Schema.parseJson(LedgerEntry))
const DAY_FILE = /^\d{4}-\d{2}-\d{2}\.jsonl$/

/**
 * The ledger's day files, read through the file services taken once (the ledger's, when its layer is
 * built): what it reads needs nothing of its caller.
 */
export const makeLedgerReader = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const dir = layout(yield* Paths).ledgerDir
  const fold = foldLinesIn(fs)
  // No ledger folder yet is no spending; one that cannot be listed fails, said by each caller (never read as empty).
  const dayFiles = fs.readDirectory(dir).pipe(
    Effect.catchIf(isNotFound, () => Effect.succeed([] as Array<string>)),
    Effect.map((names) => names.filter((f) => DAY_FILE.test(f)).sort().map((f) => ({ day: f.slice(0, 10), file: path.join(dir, f) })))
  )

  /**
   * The last week's entries, line by line (a torn or foreign line is skipped), and the days whose file
   * could not be read at all: their spending is unknown, which is not the same as none.
   */
  const recentDays = Effect.gen(function*() {
    const entries: Array<LedgerEntry> = []
    const unreadable: Array<UnreadableDay> = []
    const listed = yield* Effect.either(dayFiles)
    if (listed._tag === "Left") return { entries, unreadable: [{ day: "(every day)", detail: `${dir}: ${listed.left.message}` }] }
    for (const { day, file } of listed.right.slice(-DAYS_KEPT_IN_MEMORY)) {
      yield* fold(file, 0, (n, line) => {
        const e = decodeLine(line)
        if (e._tag === "Some") entries.push(e.value)
        return n + 1
      }).pipe(Effect.catchAll((e) => Effect.sync(() => void unreadable.push({ day, detail: `${file}: ${e.message}` }))))
    }
    return { entries, unreadable }
  })

  /** The days from `since` on whose file cannot be read. */
  const unreadableSince = (since: string) =>
    Effect.gen(function*() {
      const out: Array<UnreadableDay> = []
      const listed = yield* Effect.either(dayFiles)
      if (listed._tag === "Left") return [{ day: "(every day)", detail: `${dir}: ${listed.left.message}` }] as ReadonlyArray<UnreadableDay>
      for (const { day, file } of listed.right) {
        if (day < since) continue
        yield* fold(file, 0, (n) => n + 1).pipe(Effect.catchAll((e) => Effect.sync(() => void out.push({ day, detail: `${file}: ${e.message}` }))))
      }
      return out as ReadonlyArray<UnreadableDay>
    })

  /** The ledger's lines from `since` (a UTC day) on, one worker's or all (and one chat channel's, when given), summed per worker, read line by line. */
  const usage = (since: string, worker: Option.Option<string>, chatChannel: Option.Option<string> = Option.none()) =>
    Effect.gen(function*() {
      const byWorker = new Map<string, Sum>()
      // A day (or the folder) that cannot be read is said by `unreadableSince`, beside these sums (roster usage).
      for (const { day, file } of yield* dayFiles.pipe(Effect.orElseSucceed(() => []))) {
        if (day < since) continue
        yield* fold(file, 0, (n, line) => {
          const e = decodeLine(line)
          if (e._tag === "None" || (Option.isSome(worker) && e.value.worker !== worker.value)) return n
          if (Option.isSome(chatChannel) && e.value.chat_channel !== chatChannel.value) return n
          addTo(byWorker, e.value)
          return n + 1
          // Said by `unreadableSince` (roster usage prints it); the sums are of what could be read.
        }).pipe(Effect.ignore)
      }
      return new Map([...byWorker].map(([w, s]): [string, UsageSum] => [w, { ...s, runs: s.runs.size }]))
    })
  return { recentDays, usage, unreadableSince }
})

interface Sum {
  runs: Set<string>
  answers: number
  input: number
  output: number
  cache_read: number
  cache_write: number
  usd: number
  unpriced: number
}

const addTo = (byWorker: Map<string, Sum>, e: LedgerEntry) => {
  const s = byWorker.get(e.worker) ?? { runs: new Set(), answers: 0, input: 0, output: 0, cache_read: 0, cache_write: 0, usd: 0, unpriced: 0 }
  s.runs.add(e.run_id)
  s.answers++
  s.input += e.input
  s.output += e.output
  s.cache_read += e.cache_read
  s.cache_write += e.cache_write
  s.usd += e.usd
  if (!e.priced) s.unpriced++
  byWorker.set(e.worker, s)
}
