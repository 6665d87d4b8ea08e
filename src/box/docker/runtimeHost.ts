import { FileSystem, Path } from "@effect/platform"
import { Config, Effect, Option, Schedule, Schema } from "effect"
import type { BoxPolicy } from "../../config/schema.js"
import { Docker } from "../../docker/Docker.js"
import { writeAtomic } from "../../fs/atomic.js"
import { RUNSC_ENTRY } from "./runtime.js"
import { isNotFound } from "../../fs/notFound.js"

/** Where dockerd reads its settings and writes its pid (Docker's defaults for a root engine). */
export interface EngineHostFiles {
  readonly daemonJson: string
  readonly pidFile: string
}
export const ENGINE_HOST_FILES: EngineHostFiles = { daemonJson: "/etc/docker/daemon.json", pidFile: "/var/run/docker.pid" }

/** gVisor on this host, as `roster doctor` reports it. */
export interface RuntimeSurvey {
  readonly setting: BoxPolicy["runtime"]
  /** Where runsc is installed; null when it is not. */
  readonly installed: string | null
  /** The engine has a runtime named runsc. */
  readonly registered: boolean
  /** What a box starts under now; null when `runsc` is asked for and the engine lacks it (runs fail). */
  readonly boxes_run_under: "runsc" | "runc" | null
  /** The daemon.json lines that register it. */
  readonly daemon_json: string
}

/** A daemon.json that could not be updated, with why and what to do. */
export class RegisterError extends Schema.TaggedError<RegisterError>()("RegisterError", {
  file: Schema.String,
  detail: Schema.String
}) {
  override get message() {
    return `gVisor could not be registered in ${this.file}: ${this.detail}`
  }
}

const SEARCHED = ["/usr/bin", "/usr/local/bin", "/usr/sbin", "/usr/local/sbin"]

/** runsc's path: the first on PATH or in the usual folders. */
export const findRunsc = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const searchPath = yield* Config.string("PATH").pipe(Config.withDefault(""))
  const dirs = [...searchPath.split(":").filter((d) => d.startsWith("/")), ...SEARCHED]
  // A folder that cannot be looked in holds no runsc we can use: the next is tried, and none found is what doctor says.
  const found = yield* Effect.findFirst(dirs, (d) => fs.exists(path.join(d, "runsc")).pipe(Effect.orElseSucceed(() => false)))
  return Option.match(found, { onNone: () => null, onSome: (d) => path.join(d, "runsc") })
})

const entryFor = (runsc: string | null) => ({ ...RUNSC_ENTRY, path: runsc ?? RUNSC_ENTRY.path })

export const surveyRuntime = Effect.fn("runtime.survey")(function*(setting: BoxPolicy["runtime"]) {
  const installed = yield* findRunsc
  const registered = (yield* (yield* Docker).runtimes).includes("runsc")
  const boxesRunUnder = setting === "runc" ? "runc" : registered ? "runsc" : setting === "runsc" ? null : "runc"
  return {
    setting,
    installed,
    registered,
    boxes_run_under: boxesRunUnder,
    daemon_json: JSON.stringify({ runtimes: { runsc: entryFor(installed) } })
  } satisfies RuntimeSurvey
})

const DaemonJson = Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown }))

/** daemon.json with runsc added to its runtimes: every other setting (and runtime) kept as it was. */
const withRunsc = Effect.fn("runtime.withRunsc")(function*(files: EngineHostFiles, runsc: string) {
  const fs = yield* FileSystem.FileSystem
  // None yet is an empty one; one that cannot be read is never written over (its other settings would be lost).
  const text = yield* fs.readFileString(files.daemonJson).pipe(Effect.catchAll((e) =>
    isNotFound(e)
      ? Effect.succeed("{}")
      : Effect.fail(new RegisterError({ file: files.daemonJson, detail: `it could not be read (${e.message}); fix its permissions, then run roster doctor --fix again` }))
  ))
  const current = yield* Schema.decode(DaemonJson)(text.trim() === "" ? "{}" : text).pipe(
    Effect.mapError(() => new RegisterError({ file: files.daemonJson, detail: "it is not a JSON object; fix it by hand, then run roster doctor --fix again" }))
  )
  const runtimes = typeof current.runtimes === "object" && current.runtimes !== null ? current.runtimes : {}
  return { ...current, runtimes: { ...runtimes, runsc: entryFor(runsc) } }
})

/** dockerd re-reads daemon.json on SIGHUP: its runtimes change without a restart (running boxes keep running). */
const reloadEngine = Effect.fn("runtime.reloadEngine")(function*(files: EngineHostFiles) {
  const fs = yield* FileSystem.FileSystem
  const fail = (detail: string) => new RegisterError({ file: files.daemonJson, detail })
  // A pid file that cannot be read is no pid: the error just below says so, with the reload to do by hand.
  const pid = Number((yield* fs.readFileString(files.pidFile).pipe(Effect.orElseSucceed(() => ""))).trim())
  if (!Number.isInteger(pid) || pid <= 1) {
    return yield* Effect.fail(fail(`written, but dockerd's pid is not in ${files.pidFile}; reload it: systemctl reload docker (or kill -HUP the dockerd process)`))
  }
  yield* Effect.try({ try: () => process.kill(pid, "SIGHUP"), catch: (e) => fail(`written, but dockerd (pid ${pid}) could not be signalled: ${String(e)}`) })
  const docker = yield* Docker
  yield* docker.runtimes.pipe(
    Effect.filterOrFail((rs) => rs.includes("runsc"), () => fail("written and dockerd signalled, but it does not list runsc yet: look at dockerd's log")),
    Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo("10 seconds")))
  )
})

/**
 * `roster doctor --fix`: registers an installed runsc with the engine — daemon.json gets the
 * runtime (what the file had is kept), then dockerd reloads it. Root only: the file is root's.
 */
export const registerRunsc = Effect.fn("runtime.register")(function*(files: EngineHostFiles) {
  const runsc = yield* findRunsc
  if (runsc === null) return yield* Effect.fail(new RegisterError({ file: files.daemonJson, detail: "runsc is not installed: apt-get install runsc, then run roster doctor --fix again" }))
  if (process.getuid?.() !== 0) return yield* Effect.fail(new RegisterError({ file: files.daemonJson, detail: "only root may change it: sudo roster doctor --fix" }))
  const next = yield* withRunsc(files, runsc)
  yield* writeAtomic(files.daemonJson, `${JSON.stringify(next, null, 2)}\n`).pipe(
    Effect.mapError((e) => new RegisterError({ file: files.daemonJson, detail: e.message }))
  )
  yield* reloadEngine(files)
  return `registered gVisor: ${files.daemonJson} has runtime runsc (${runsc}), dockerd reloaded`
})
