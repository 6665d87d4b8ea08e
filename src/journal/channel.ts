import { FileSystem, Path } from "@effect/platform"
import { Clock, Effect, GlobalValue, Option, Schema } from "effect"
import { RunId } from "../config/names.js"
import { Paths, layout } from "../config/Paths.js"
import { writeAtomic, writeJson } from "../fs/atomic.js"
import { Files } from "../fs/Files.js"
import { isNotFound, readOr } from "../fs/notFound.js"

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

/** A worker's words that reached a channel without a line in its history (that line could not be written). */
const Unrecorded = Schema.parseJson(Schema.Struct({
  speakers: Schema.Array(Schema.Struct({ worker: Schema.String, run_id: RunId, at: Schema.String }))
}))
type Speaker = { readonly worker: string; readonly runId: string }

/**
 * What could be kept neither in the history nor beside it (the disk full, say): held by this process, so
 * its next runs of the channel still take those runs' taint — a channel forgets them only with a restart.
 */
const heldInMemory = GlobalValue.globalValue(Symbol.for("roster/channel/unrecorded"), () => new Map<string, Map<string, Speaker>>())

const writeLine = (channel: string, entry: Omit<ChannelEntry, "time">) =>
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
  })

/** The speakers noted beside a channel's history (none when nothing was); fails when the note cannot be read. */
const readUnrecorded = (channel: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const text = yield* fs.readFileString(layout(yield* Paths).channelUnrecordedFile(channel)).pipe(Effect.catchIf(isNotFound, () => Effect.succeed(undefined)))
    return text === undefined ? [] : (yield* Schema.decode(Unrecorded)(text)).speakers
  })

/** Notes a run's words beside the history they could not be written into; a note that cannot be read is not written over. */
const noteUnrecorded = (channel: string, speaker: Speaker) =>
  Effect.gen(function*() {
    const before = yield* readUnrecorded(channel)
    if (before.some((s) => s.run_id === speaker.runId)) return
    const at = new Date(yield* Clock.currentTimeMillis).toISOString()
    const speakers = [...before, { worker: speaker.worker, run_id: speaker.runId, at }].slice(-KEEP_LINES)
    yield* writeJson(layout(yield* Paths).channelUnrecordedFile(channel), { speakers }, 0o644)
  })

/**
 * Appends a message to the channel's history. A box that serves the channel has its folder
 * mounted, so the cut (rarely) replaces the file by rename and the folder shows the new one.
 * A history that cannot be written never fails the turn it records, but a worker's line is what
 * the channel's next runs take its run's taint from: noted beside the history instead (else held
 * by this process), so a line lost is never a taint lost.
 */
export const appendChannel = (channel: string, entry: Omit<ChannelEntry, "time">) =>
  writeLine(channel, entry).pipe(Effect.catchAll((e) => {
    const lost = `the history of channel ${channel} could not be written: ${e.message}`
    if (entry.role !== "worker" || entry.run_id === undefined) return Effect.logWarning(lost)
    const speaker = { worker: entry.author, runId: entry.run_id }
    return noteUnrecorded(channel, speaker).pipe(
      Effect.zipRight(Effect.logWarning(`${lost}; run ${speaker.runId}'s words are noted beside it, so the channel's next runs still take that run's taint`)),
      Effect.catchAll((n) =>
        Effect.sync(() => {
          const held = heldInMemory.get(channel) ?? new Map<string, Speaker>()
          held.set(speaker.runId, speaker)
          heldInMemory.set(channel, held)
        }).pipe(Effect.zipRight(Effect.logError(
          `${lost}; nor could run ${speaker.runId}'s words be noted beside it (${n.message}): this daemon holds them, so the channel's next runs still take that run's taint — until it restarts`
        )))
      )
    )
  }))

/** The channel's last `n` messages, oldest first (none when it has no history yet). */
export const recentChannel = (channel: string, n = 20) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const file = yield* channelHistoryFile(channel)
    const text = yield* fs.readFileString(file).pipe(readOr(file, ""))
    return text.split("\n").filter((l) => l !== "").slice(-n).map((l) => decodeLine(l)).filter(Option.isSome).map((o) => o.value)
  })

/**
 * The runs whose words are in a channel's history (its worker lines, and those noted beside it), each
 * with its worker: a run given the channel reads them (its /pihome/channel, a chat session's first
 * turn), so their taint is its own (box/inheritTaint.ts). Oldest first; none when it has no history.
 * `unknown` says what could not be read — a run given it starts tainted (its speakers' taint unknowable).
 */
export const channelSpeakers = (channel: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const unknown: Array<string> = []
    const file = yield* channelHistoryFile(channel)
    // No history yet is none; one that cannot be read is not: its speakers' taint is unknown.
    const text = yield* fs.readFileString(file).pipe(Effect.catchAll((e) =>
      isNotFound(e)
        ? Effect.succeed("")
        : Effect.sync(() => (unknown.push(`channel ${channel}'s history could not be read (${e.message})`), ""))
    ))
    const seen = new Map<string, Speaker>()
    for (const l of text.split("\n")) {
      if (l === "") continue
      const e = decodeLine(l)
      if (e._tag === "Some" && e.value.role === "worker" && e.value.run_id !== undefined) seen.set(e.value.run_id, { worker: e.value.author, runId: e.value.run_id })
    }
    const noted = yield* readUnrecorded(channel).pipe(Effect.either)
    if (noted._tag === "Left") unknown.push(`the words noted beside channel ${channel}'s history could not be read (${noted.left.message})`)
    else for (const s of noted.right) seen.set(s.run_id, { worker: s.worker, runId: s.run_id })
    for (const s of heldInMemory.get(channel)?.values() ?? []) seen.set(s.runId, s)
    return { speakers: [...seen.values()], unknown }
  })
