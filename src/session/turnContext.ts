import { Effect, Schema } from "effect"
import { Files } from "../fs/Files.js"

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
  /** The room's recent messages; used on the session's first turn only. */
  readonly history?: ReadonlyArray<{ readonly author: string; readonly text: string }>
}

/**
 * A turn's input: the message with its provenance, the room's recent past on the first turn
 * only (a warm session already holds everything since), traced to turns.jsonl.
 */
export const compileTurn = (message: SessionMessage, turn: number, traceFile: string) =>
  Effect.gen(function*() {
    if (message.text.trim() === "") return yield* Effect.fail(new UnpreparableMessage({ detail: "the message is blank" }))
    const history = turn === 1 && message.history && message.history.length > 0
      ? `Recent messages before this one:\n${message.history.map((h) => `- ${h.author}: ${h.text}`).join("\n")}\n\n`
      : ""
    const input = message.provider === "terminal" ? `${history}${message.text}` :
      `${history}[${message.provider} message ${message.messageId} from ${message.author}]\n${message.text}`
    const line = `${JSON.stringify({ turn, author: message.author, provider: message.provider, message_id: message.messageId, input })}\n`
    yield* (yield* Files).append(traceFile, line, 0o644).pipe(
      Effect.mapError((e) => new UnpreparableMessage({ detail: `its trace could not be written: ${e.message}` }))
    )
    return input
  })
