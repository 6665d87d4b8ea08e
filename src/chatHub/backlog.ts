import { FileSystem, Path } from "@effect/platform"
import { Clock, Effect, Schema } from "effect"
import { ChatPlace } from "../contract/origin.js"
import { atomicIn } from "../fs/atomic.js"
import { isNotFound } from "../fs/notFound.js"
import type { HistoryLine, SessionMessage } from "../session/turnContext.js"

/** The most messages of one thread that wait for a channel's next session; older ones are dropped, their thread told. */
export const WAITING_PER_THREAD = 10

/** A chat message no session answered, waiting for the channel's next one: what is kept of it on disk. */
const WaitingLine = Schema.Struct({
  text: Schema.String,
  author: Schema.String,
  provider: Schema.String,
  messageId: Schema.String,
  place: ChatPlace,
  /** When it was first told to wait. */
  since: Schema.String
})

const WaitingFile = Schema.parseJson(Schema.Struct({ messages: Schema.Array(WaitingLine) }))

/** A message waiting for the next session, and since when. */
export type Waiting = SessionMessage & { readonly place: ChatPlace; readonly since: string }

/** Where a channel's waiting messages are kept, so a daemon's restart (even kill -9) does not lose them. */
export interface Backlog {
  readonly load: Effect.Effect<ReadonlyArray<Waiting>>
  readonly save: (waiting: ReadonlyArray<Waiting>) => Effect.Effect<void>
}

/** None kept: a desk without a file (a unit test's). */
export const memoryBacklog: Backlog = { load: Effect.succeed([]), save: () => Effect.void }

const lineOf = (w: Waiting): typeof WaitingLine.Type => ({
  text: w.text, author: w.author, provider: w.provider, messageId: w.messageId, place: w.place, since: w.since
})

/**
 * A channel's waiting messages in one file (written whole, atomically). One that cannot be read is put
 * aside as it was, and said where — never overwritten by the next save.
 */
export const fileBacklog = (file: string, where: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const { writeJson } = atomicIn(fs, yield* Path.Path)
    const load = Effect.gen(function*() {
      const text = yield* fs.readFileString(file).pipe(Effect.catchIf(isNotFound, () => Effect.succeed(undefined)))
      return text === undefined ? [] : (yield* Schema.decode(WaitingFile)(text)).messages
    }).pipe(
      Effect.catchAll((e) =>
        Effect.gen(function*() {
          const aside = `${file}.unreadable-${yield* Clock.currentTimeMillis}`
          // Left where it is when it cannot be moved: the next save would otherwise write over what it holds.
          const moved = yield* fs.rename(file, aside).pipe(Effect.as(`put aside at ${aside}`), Effect.catchAll((m) => Effect.succeed(`left at ${file} (${m.message})`)))
          yield* Effect.logError(`${where}: the messages waiting for its next session could not be read (${e.message}); ${moved}, and the channel starts with none waiting`)
          return []
        })
      )
    )
    const save = (waiting: ReadonlyArray<Waiting>) =>
      (waiting.length === 0
        ? fs.remove(file, { force: true })
        : writeJson(file, { messages: waiting.map(lineOf) }, 0o600)).pipe(
          Effect.catchAll((e) => Effect.logWarning(`${where}: the messages waiting for its next session could not be kept on disk (a restart would lose them): ${e.message}`))
        )
    return { load, save } satisfies Backlog
  })

/** A message's thread within its channel (Discord's channel itself when it has none). */
const threadOf = (p: ChatPlace) => p.thread ?? ""

/** Messages by their thread (each with the place of its first), in the order the threads first came. */
export const groupByThread = <A extends { readonly place: ChatPlace }>(ms: ReadonlyArray<A>) => {
  const by = new Map<string, [ChatPlace, Array<A>]>()
  for (const m of ms) {
    const entry = by.get(threadOf(m.place)) ?? [m.place, []]
    entry[1].push(m)
    by.set(threadOf(m.place), entry)
  }
  return [...by.values()]
}

/** The newest {@link WAITING_PER_THREAD} of each thread kept, in order; the rest dropped. */
export const bounded = (waiting: ReadonlyArray<Waiting>, perThread = WAITING_PER_THREAD) => {
  const left = new Map<string, number>()
  const kept: Array<Waiting> = []
  const dropped: Array<Waiting> = []
  for (const w of [...waiting].reverse()) {
    const n = left.get(threadOf(w.place)) ?? 0
    left.set(threadOf(w.place), n + 1)
    ;(n < perThread ? kept : dropped).unshift(w)
  }
  return { kept, dropped }
}

/**
 * The first turn's past with the backlog in it: messages no session answered are the worker's to
 * read (history), not turns replayed long after — the message that started the session is the turn.
 * One the service's past already shows is marked there; the rest follow it, oldest first.
 */
export const withBacklog = (past: ReadonlyArray<HistoryLine> | undefined, backlog: ReadonlyArray<Waiting>, place: ChatPlace): ReadonlyArray<HistoryLine> | undefined => {
  if (backlog.length === 0) return past
  const lines: Array<HistoryLine> = [...(past ?? [])]
  for (const w of backlog) {
    const waited = threadOf(w.place) === threadOf(place) ? "here" as const : "another thread" as const
    const shown = lines.findIndex((l) => l.speaker === undefined && l.waited === undefined && l.author === w.author && l.text === w.text)
    if (shown >= 0) lines[shown] = { ...lines[shown]!, waited }
    else lines.push({ author: w.author, text: w.text, waited })
  }
  return lines
}
