import { FileSystem, Path } from "@effect/platform"
import { Clock, Effect, Option, Schema } from "effect"
import { RunId } from "../config/names.js"
import { Paths, layout } from "../config/Paths.js"
import { writeAtomic } from "../fs/atomic.js"
import { Files } from "../fs/Files.js"

/** One message of a channel, as its history file holds it (and a box reads it at /pihome/channel/history.jsonl). */
export const ChannelEntry = Schema.Struct({
  time: Schema.String,
  author: Schema.String,
  text: Schema.String,
  run_id: Schema.optional(RunId),
  /** Who spoke: a person (the default, and every line written before roles were), or a worker's own words. */
  role: Schema.optional(Schema.Literal("person", "worker"))
})
export type ChannelEntry = typeof ChannelEntry.Type

/** The history keeps its recent past: past this size it is cut to its last KEEP_LINES messages. */
const MAX_BYTES = 256 * 1024
const KEEP_LINES = 200

export const channelHistoryFile = (channel: string) => Effect.map(Paths, (p) => `${layout(p).channelDir(channel)}/history.jsonl`)

const decodeLine = Schema.decodeUnknownOption(Schema.parseJson(ChannelEntry))

/**
 * Appends a message to the channel's history. A box that serves the channel has its folder
 * mounted, so the cut (rarely) replaces the file by rename and the folder shows the new one.
 * A history that cannot be written is logged: it never fails the turn it records.
 */
export const appendChannel = (channel: string, entry: Omit<ChannelEntry, "time">) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const file = yield* channelHistoryFile(channel)
    yield* fs.makeDirectory((yield* Path.Path).dirname(file), { recursive: true })
    const time = new Date(yield* Clock.currentTimeMillis).toISOString()
    yield* (yield* Files).append(file, `${JSON.stringify({ time, ...entry })}\n`, 0o644)
    const size = yield* fs.stat(file).pipe(Effect.map((s) => Number(s.size)))
    if (size > MAX_BYTES) {
      const lines = (yield* fs.readFileString(file)).split("\n").filter((l) => l !== "")
      yield* writeAtomic(file, `${lines.slice(-KEEP_LINES).join("\n")}\n`, 0o644)
    }
  }).pipe(Effect.catchAll((e) => Effect.logWarning(`the history of channel ${channel} could not be written: ${e.message}`)))

/** The channel's last `n` messages, oldest first (none when it has no history yet). */
export const recentChannel = (channel: string, n = 20) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const file = yield* channelHistoryFile(channel)
    const text = yield* fs.readFileString(file).pipe(Effect.orElseSucceed(() => ""))
    return text.split("\n").filter((l) => l !== "").slice(-n).map((l) => decodeLine(l)).filter(Option.isSome).map((o) => o.value)
  })

/**
 * The runs whose words are in a channel's history (its worker lines), each with its worker: a run
 * given the channel reads them (its /pihome/channel, a chat session's first turn), so their taint
 * is its own (box/inheritTaint.ts). Oldest first; none when it has no history.
 */
export const channelSpeakers = (channel: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const text = yield* fs.readFileString(yield* channelHistoryFile(channel)).pipe(Effect.orElseSucceed(() => ""))
    const seen = new Map<string, { readonly worker: string; readonly runId: string }>()
    for (const l of text.split("\n")) {
      if (l === "") continue
      const e = decodeLine(l)
      if (e._tag === "Some" && e.value.role === "worker" && e.value.run_id !== undefined) seen.set(e.value.run_id, { worker: e.value.author, runId: e.value.run_id })
    }
    return [...seen.values()]
  })
