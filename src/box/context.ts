import { Effect } from "effect"
import * as crypto from "node:crypto"
import { writeJson } from "../fs/atomic.js"
import { readIdentity } from "../worker/workers.js"
import { MNT, PIHOME, SELF, STORE, WORKSPACE } from "../contract/constants.js"

export interface CompiledContext {
  readonly system_prompt: string
  readonly input_prompt: string | null
  readonly cache: { readonly route_key: string }
}

export interface ContextRequest {
  readonly runId: string
  readonly worker: string
  readonly surface: "direct-box" | "queued-task" | "term-session"
  readonly prompt: string | null
  readonly mounts: ReadonlyArray<{ readonly name: string; readonly rw: boolean }>
}

/** What the worker should know about the box it wakes up in. Stable across runs, so it caches. */
export const briefing = (mounts: ContextRequest["mounts"]) =>
  [
    "## Your box",
    `You run inside a locked-down container. Your home is ${PIHOME}; you start in ${WORKSPACE}, which is fresh for this run.`,
    `- ${STORE}: your durable store. What you keep here is there next run (snapshots are taken after each run).`,
    `- ${SELF}: read-only: your own configuration, journal and past runs.`,
    ...(mounts.length > 0
      ? mounts.map((m) => `- ${MNT}/${m.name}: a host folder granted to you (${m.rw ? "read-write" : "read-only"}).`)
      : []),
    "- The network: only through roster's gateway (already set as your HTTP(S) proxy). Hosts not granted to you are refused.",
    "- You hold no real credentials; where a credential is needed the gateway supplies it in transit.",
    "- Time: a run has a ceiling (minutes in $ROSTER_CEILING_MIN) after which the box is stopped; save work as you go."
  ].join("\n")

/**
 * A stable key for the provider's prompt cache and pi's session id: the same worker with the
 * same system prompt routes to the same cache, whatever the run.
 */
export const routeKey = (worker: string, systemPrompt: string) =>
  `roster-pc-${crypto.createHash("sha256").update(`${worker}\0${systemPrompt}`).digest("hex").slice(0, 16)}`

/** System prompt, input prompt and route key for one run, traced to context.json beside run.json. */
export const compileContext = Effect.fn("context.compile")(function*(req: ContextRequest, traceFile: string) {
  const identity = yield* readIdentity(req.worker)
  const system = `${identity.trim()}\n\n${briefing(req.mounts)}`
  const input = req.prompt
  const compiled: CompiledContext = {
    system_prompt: system,
    input_prompt: input,
    cache: { route_key: routeKey(req.worker, system) }
  }
  yield* writeJson(traceFile, { run_id: req.runId, worker: req.worker, surface: req.surface, ...compiled })
  return compiled
})
