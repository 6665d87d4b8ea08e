import { Cause } from "effect"

/** The one line a run record keeps of why a run failed: the error's own message, else the cause's first line. */
export const causeText = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.failureOption(cause)
  if (failure._tag === "Some") return failure.value instanceof Error ? failure.value.message : String(failure.value)
  return Cause.pretty(cause).split("\n")[0] ?? "unknown error"
}
