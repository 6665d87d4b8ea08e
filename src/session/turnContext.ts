import { Effect, Schema } from "effect"
import type { ChatPlace } from "../contract/origin.js"
import { promptBlock, promptLine } from "../contract/promptText.js"
import type { TurnLine } from "../contract/turnLine.js"
import { Files } from "../fs/Files.js"
import type { FileNote, MessageFile } from "../contract/messageFile.js"

/** A session message that could not become a turn (blank, or its trace could not be written); it is skipped, not delivered. */
export class UnpreparableMessage extends Schema.TaggedError<UnpreparableMessage>()("UnpreparableMessage", { detail: Schema.String }) {
  override get message() {
    return this.detail
  }
}

/** One message for a warm session: its text and where it came from. */
export interface SessionMessage {
  readonly text: string
  readonly author: string
  readonly provider: string
  readonly messageId: string
  /** Who speaks: a person (the default), or another task's answer delivered here (reply_to talk:<run-id>). */
  readonly role?: "person" | "task-reply"
  /** A chat message's channel and thread: the turn's answer is sent there. */
  readonly place?: ChatPlace
  /** The room's recent messages; used on the session's first turn only. */
  readonly history?: ReadonlyArray<HistoryLine>
  /** Files the message carries (a chat message's attachments), fetched into the run's inbox when its turn comes. */
  readonly files?: ReadonlyArray<MessageFile>
  /** What became of them: named in the turn's input. */
  readonly fileNotes?: ReadonlyArray<FileNote>
}

/** One message of the room's past: who wrote it, and whether it was a worker — this session's own, or another. */
export interface HistoryLine {
  readonly author: string
  readonly text: string
  readonly speaker?: "you" | "worker"
  /** A message no session answered, that waited for this one: in this thread, or in another of the channel. */
  readonly waited?: "here" | "another thread"
}

const speakerMark = { you: " (you)", worker: " (a roster worker)" } as const
const waitedMark = {
  here: " (not answered: it waited for this session)",
  "another thread": " (not answered, in another thread of this channel: it waited for this session)"
} as const

const historyLine = (h: HistoryLine) =>
  `- ${promptLine(h.author)}${h.speaker ? speakerMark[h.speaker] : ""}${h.waited ? waitedMark[h.waited] : ""}: ${promptLine(h.text)}`

/** How a message is introduced to the worker: a person's plain words, or where it came from. */
const heading = (m: SessionMessage) =>
  m.role === "task-reply"
    ? `[the answer of ${m.author}, delivered to this conversation (its reply_to); not a person's message]\n`
    : m.provider === "terminal" ? "" : `[${m.provider} message ${promptLine(m.messageId)} from ${promptLine(m.author)}]\n`

/** The files a message brought, each with where the worker reads it or why it was not fetched. */
const filesBlock = (notes: ReadonlyArray<FileNote> | undefined) =>
  notes === undefined || notes.length === 0 ? "" : `\n\nFiles attached to this message (read-only in your box):\n${
    notes.map((n) =>
      `- ${promptLine(n.name)} (${promptLine(n.type)}, ${n.size.toLocaleString("en-US")} bytes): ${n.path ?? `not fetched — ${promptLine(n.skipped ?? "unknown")}`}`
    ).join("\n")
  }`

/**
 * A turn's input. The first turn is the Start phase: the run's preamble (surface, origin, memory)
 * and the room's recent past before the message; a later turn is the Turn phase: the message with
 * its role and author. Traced to turns.jsonl.
 */
export const compileTurn = (message: SessionMessage, turn: number, traceFile: string, preamble = "") =>
  Effect.gen(function*() {
    if (message.text.trim() === "") return yield* Effect.fail(new UnpreparableMessage({ detail: "the message is blank" }))
    const history = turn === 1 && message.history && message.history.length > 0
      ? `Recent messages before this one:\n${message.history.map(historyLine).join("\n")}\n\n`
      : ""
    const start = turn === 1 && preamble !== "" ? `${preamble}\n\n## The first message\n` : ""
    const input = `${start}${history}${heading(message)}${promptBlock(message.text)}${filesBlock(message.fileNotes)}`
    const record: TurnLine = {
      turn, phase: turn === 1 ? "start" : "turn", author: message.author, role: message.role ?? "person", provider: message.provider,
      message_id: message.messageId, input
    }
    const line = `${JSON.stringify(record)}\n`
    yield* (yield* Files).append(traceFile, line, 0o644).pipe(
      Effect.mapError((e) => new UnpreparableMessage({ detail: `its trace could not be written: ${e.message}` }))
    )
    return input
  })
