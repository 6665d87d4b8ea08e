import { Effect } from "effect"
import { layout, Paths } from "../../config/Paths.js"
import type { BoxPolicy } from "../../config/schema.js"
import { Docker } from "../../docker/Docker.js"
import { notice, Reporter } from "../../report/Reporter.js"
import { onceADay } from "../daily.js"
import type { BoxRuntime } from "../../backend/plan.js"
import { HOW_TO_ADD_RUNSC, RUNSC_DAEMON_JSON, RUNSC_ENTRY, RuntimeMissing } from "../../backend/errors.js"

export type { BoxRuntime }
export { RUNSC_DAEMON_JSON, RUNSC_ENTRY, RuntimeMissing }

/**
 * The runtime `[box] runtime` names on this engine: runsc or runc as asked (runsc must be
 * registered: a box never silently falls back from the kernel wall it was promised); `auto`
 * takes runsc when registered, else runc with a note once a day saying how to add it.
 */
export const resolveRuntime = Effect.fn("box.resolveRuntime")(function*(policy: Pick<BoxPolicy, "runtime">) {
  if (policy.runtime === "runc") return "runc" satisfies BoxRuntime
  const registered = yield* (yield* Docker).runtimes
  if (registered.includes("runsc")) return "runsc" satisfies BoxRuntime
  if (policy.runtime === "runsc") return yield* Effect.fail(new RuntimeMissing({ registered }))
  const reporter = yield* Reporter
  yield* onceADay(
    layout(yield* Paths).runtimeNoted,
    reporter.report(notice(`boxes run under runc: their syscalls reach this host's kernel. For gVisor's user-space kernel, ${HOW_TO_ADD_RUNSC}. (said once a day)`))
  )
  return "runc" satisfies BoxRuntime
})
