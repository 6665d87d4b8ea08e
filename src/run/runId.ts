import { Clock, Effect } from "effect"
import * as crypto from "node:crypto"

/** `YYYY-MM-DD-HH-MM-SS-xxxxxxxx` (UTC): sortable by start, and two runs in one second never collide. */
export const newRunId = Effect.gen(function*() {
  const now = new Date(yield* Clock.currentTimeMillis)
  const stamp = now.toISOString().slice(0, 19).replace(/[T:]/g, "-")
  return `${stamp}-${crypto.randomBytes(4).toString("hex")}`
})
