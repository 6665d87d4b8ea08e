import { Schema } from "effect"

/** An option's value a command cannot use, with how to say it. */
export class BadInput extends Schema.TaggedError<BadInput>()("BadInput", { detail: Schema.String }) {
  override get message() {
    return this.detail
  }
}
