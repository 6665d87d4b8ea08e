import { Schema } from "effect"

export class LockdownError extends Schema.TaggedError<LockdownError>()("LockdownError", {
  reason: Schema.String
}) {
  override get message() {
    return `refusing to start the box with open egress: ${this.reason}`
  }
}
