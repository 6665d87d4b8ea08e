import { Option, Schema } from "effect"

/** One line of a session's turns.jsonl: each turn's input as the worker got it, and whose message it served. */
export const TurnLine = Schema.Struct({
  turn: Schema.Number,
  phase: Schema.Literal("start", "turn"),
  author: Schema.String,
  role: Schema.String,
  provider: Schema.String,
  message_id: Schema.String,
  input: Schema.String
})
export type TurnLine = typeof TurnLine.Type

const decodeLine = Schema.decodeUnknownOption(Schema.parseJson(TurnLine))

/** A line of turns.jsonl, if it is one. */
export const readTurnLine = (line: string): TurnLine | undefined => Option.getOrUndefined(decodeLine(line))
