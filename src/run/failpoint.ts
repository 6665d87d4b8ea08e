import { Effect } from "effect"

/**
 * A named point where a crash test kills this process (`ROSTER_FAILPOINT=<name>`): SIGKILL, as the
 * kernel or a person's `kill -9` would — nothing runs after it, no finalizer, no flush. What the next
 * start finds is what such a crash leaves (integration tests: warm.test's hand-over). Unset, it is a
 * string comparison.
 */
export const failpoint = (name: string) =>
  Effect.sync(() => {
    if (process.env.ROSTER_FAILPOINT === name) process.kill(process.pid, "SIGKILL")
  })
