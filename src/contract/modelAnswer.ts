import { Schema } from "effect"

/** An Anthropic usage object: token counts, each read only when it is a number. */
export const ModelUsage = Schema.Struct({
  input_tokens: Schema.optional(Schema.Unknown),
  output_tokens: Schema.optional(Schema.Unknown),
  cache_read_input_tokens: Schema.optional(Schema.Unknown),
  cache_creation_input_tokens: Schema.optional(Schema.Unknown)
})
export type ModelUsage = typeof ModelUsage.Type

/**
 * What the gateway's meter reads of a model answer: a whole JSON answer, or one streamed event
 * (message_start carries the input's usage, content_block_delta the text so far, message_delta
 * the output's usage). Everything else in it is ignored.
 */
export const ModelAnswerEvent = Schema.Struct({
  type: Schema.optional(Schema.Unknown),
  message: Schema.optional(Schema.Struct({ usage: Schema.optional(ModelUsage) })),
  usage: Schema.optional(ModelUsage),
  /** A delta's text so far, counted for an estimate until the answer says its real output count. */
  delta: Schema.optional(Schema.Struct({
    text: Schema.optional(Schema.Unknown),
    partial_json: Schema.optional(Schema.Unknown),
    thinking: Schema.optional(Schema.Unknown)
  }))
})
export type ModelAnswerEvent = typeof ModelAnswerEvent.Type

// Checked, not decoded: the schema transforms nothing, and a check allocates a fraction of what a
// decode does — this runs on every event of every model answer through the gateway.
const isModelAnswer = Schema.is(ModelAnswerEvent)

/** A model answer or stream event, if the text is one. */
export const readModelAnswer = (text: string): ModelAnswerEvent | undefined => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    return undefined
  }
  return isModelAnswer(json) ? json : undefined
}
