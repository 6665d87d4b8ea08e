import { Schema } from "effect"

/** A post to a chat service that did not land: where, and what the service or the config said. */
export class ChatPostError extends Schema.TaggedError<ChatPostError>()("ChatPostError", {
  where: Schema.String,
  detail: Schema.String
}) {
  override get message() {
    return `posting to ${this.where}: ${this.detail}`
  }
}
