import { Effect } from "effect"
import { BoxBackend } from "./BoxBackend.js"

/**
 * Kills a box where nothing waits on the answer (a reaper, a cancel, a take-over): a kill the engine
 * refuses is said, with the box and what to do, never dropped — the box may still run. An absent
 * box is not a refusal (the backend answers that as not killed).
 */
export const killOrSay = (box: string, what: string) =>
  Effect.flatMap(BoxBackend, (backend) => backend.kill(box)).pipe(
    Effect.asVoid,
    Effect.catchAll((e) =>
      Effect.logWarning(`${what}: the engine refused to kill its box ${box} (${e.message}); it may still run — the daemon's reaper tries again at its deadline, or kill it by hand: docker kill ${box}`))
  )

/** Kills a run's box, if this deployment has one under the run's name, where nothing waits on the answer; a refusal is said. */
export const killRunOrSay = (runId: string, what: string) =>
  Effect.flatMap(BoxBackend, (backend) => backend.killRun(runId)).pipe(
    Effect.asVoid,
    Effect.catchAll((e) =>
      Effect.logWarning(`${what}: the engine refused to kill the box of run ${runId} (${e.message}); it may still run — the daemon's reaper tries again at its deadline`))
  )

/** Kills and removes a box where nothing waits on the answer (a reaper, a take-over); a refusal is said. */
export const removeOrSay = (box: string, what: string) =>
  Effect.flatMap(BoxBackend, (backend) => backend.remove(box)).pipe(
    Effect.catchAll((e) =>
      Effect.logWarning(`${what}: the engine refused to remove its box ${box} (${e.message}); remove it by hand: docker rm -f ${box}`))
  )
