import { Effect, Schema } from "effect"
import { layout, Paths } from "../config/Paths.js"
import type { BoxPolicy } from "../config/schema.js"
import { Docker } from "../docker/Docker.js"
import { notice, Reporter } from "../report/Reporter.js"
import { onceADay } from "./daily.js"

/** The OCI runtime a box runs under: gVisor's user-space kernel, or the host's kernel. */
export type BoxRuntime = "runsc" | "runc"

/** What `/etc/docker/daemon.json` needs for gVisor: runsc in the network namespace Docker made for the box. */
export const RUNSC_ENTRY = { path: "/usr/bin/runsc", runtimeArgs: ["--network=host"] } as const
export const RUNSC_DAEMON_JSON = JSON.stringify({ runtimes: { runsc: RUNSC_ENTRY } })

const HOW_TO_ADD = `install gVisor (apt-get install runsc), add ${RUNSC_DAEMON_JSON} to /etc/docker/daemon.json and reload ` +
  `dockerd (kill -HUP $(cat /var/run/docker.pid)) — roster doctor --fix does both as root`

/** `[box] runtime = "runsc"` on an engine that has no such runtime. */
export class RuntimeMissing extends Schema.TaggedError<RuntimeMissing>()("RuntimeMissing", {
  registered: Schema.Array(Schema.String)
}) {
  override get message() {
    return `[box] runtime = "runsc" but the Docker engine has no runtime named runsc (it has: ${this.registered.join(", ") || "none"}): ` +
      `${HOW_TO_ADD}; or set [box] runtime = "auto" to fall back to runc`
  }
}

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
    reporter.report(notice(`boxes run under runc: their syscalls reach this host's kernel. For gVisor's user-space kernel, ${HOW_TO_ADD}. (said once a day)`))
  )
  return "runc" satisfies BoxRuntime
})
