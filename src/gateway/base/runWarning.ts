import { Effect } from "effect"
import { RunLog } from "../../run/RunLog.js"
import type { Caller } from "./identify.js"

/** A run keeps at most this many warnings: a box cannot grow its record by misbehaving. */
const MAX_WARNINGS = 20

/** The warning of a request that left with a sentinel: where it was, never a value. */
export const sentinelWarning = (host: string, places: ReadonlyArray<string>) =>
  `a request to ${host} left the gateway with the sentinel (roster's placeholder, not a credential) in ${places.join(", ")}: ` +
  `the upstream got the placeholder there. A credential is injected only in the header its [[grant]] names (x-api-key, ` +
  `Authorization: Bearer or Basic); check the [[grant]] for ${host} and the [[expose]] the program read`

/** Adds a warning to the caller's run record, once; a host caller or a record that cannot be written only logs it. */
export const warnRun = (caller: Caller, text: string) =>
  Effect.gen(function*() {
    yield* Effect.logWarning(`gateway: run ${caller.runId ?? "-"} (${caller.subject}): ${text}`)
    if (!caller.runId || !caller.worker) return
    const runLog = yield* RunLog
    const run = yield* runLog.read(caller.worker, caller.runId)
    const known = run?.warnings ?? []
    if (!run || known.includes(text) || known.length >= MAX_WARNINGS) return
    yield* runLog.append(caller.worker, caller.runId, { kind: "warning", text })
  }).pipe(Effect.catchAll((e) => Effect.logWarning(`gateway: a run warning could not be recorded: ${e.message}`)))
