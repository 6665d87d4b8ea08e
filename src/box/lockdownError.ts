import { Schema } from "effect"

/** The lockdown could not be made sure (network, gateway, firewall): the box is not started, and the error names the fix. */
export class LockdownError extends Schema.TaggedError<LockdownError>()("LockdownError", {
  reason: Schema.String
}) {
  override get message() {
    return `refusing to start the box with open egress: ${this.reason}`
  }
}
