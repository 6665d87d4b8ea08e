import { Effect } from "effect"
import * as crypto from "node:crypto"
import { writeJson } from "../fs/atomic.js"
import { readIdentity } from "../worker/workers.js"
import type { MountRule } from "../config/schema.js"
import { CHANNEL, MNT, PIHOME, SELF, STORE, WORKSPACE } from "../contract/constants.js"
import { repoNotes, type RepoNote } from "../knowledge/notes.js"
import { openTaints, taintLine } from "../contract/taint.js"
import { RunLog } from "../run/RunLog.js"
import type { ChatPlace, RunOrigin } from "../contract/origin.js"
import type { Surface } from "../contract/runContext.js"
import { promptBlock } from "../contract/promptText.js"
import { MemoryStore } from "../memory/MemoryStore.js"
import { briefable, continuesSentence, interruptedSentence, memoryBlock, replySentence, surfaceSentence } from "./startInput.js"
import type { Interruption } from "../contract/interruption.js"

export interface CompiledContext {
  readonly system_prompt: string
  readonly input_prompt: string | null
  /** What the Start input says before the prompt (surface, origin, reply_to, continuation, memory); a session puts it before its first message. */
  readonly start_preamble: string
  readonly cache: { readonly route_key: string }
  /** The memory entries the briefing carried. */
  readonly memory_briefed: ReadonlyArray<string>
}

/** The Start phase of a run's context: who asks, where, for what, and what the worker remembers. */
export interface ContextRequest {
  readonly runId: string
  readonly worker: string
  readonly surface: Surface
  readonly origin: RunOrigin
  readonly prompt: string | null
  readonly mounts: ReadonlyArray<MountRule>
  /** The run's channel, when it has one (/pihome/channel). */
  readonly channel?: string | null
  readonly chat?: ChatPlace | undefined
  readonly replyTo?: string | null
  readonly continues?: { readonly task_id: string | null; readonly run_id: string } | null
  readonly interrupted?: Interruption | null
  /** `[memory] brief_max`: characters of memory the Start input may carry. */
  readonly briefMax?: number
  /** The system prompt, when the run's box was made with it already (a warm box's): else compiled here. */
  readonly system?: string | undefined
}

const mountLine = (m: MountRule) =>
  m.kind === "dir"
    ? `- ${MNT}/${m.name}: a host folder granted to you (${m.rw ? "read-write" : "read-only"}).`
    : `- ${MNT}/${m.name}: a git repository granted to you (read-only).`

/** A repo's note with which of its unlanded refs come from tainted runs, and why. */
type BriefedRepo = RepoNote & { readonly tainted?: ReadonlyMap<string, string> }

const repoLines = ({ tainted = new Map(), ...r }: BriefedRepo) => [
  `- ${MNT}/${r.name}: your own clone of the ${r.name} repository (${r.rw ? "read-write" : "read-only"}), on a branch of this run ` +
  `(roster/<you>/<run id>) from ${r.defaultBranch ?? "its default branch"}; $ROSTER_REPOS_JSON lists its base and branch. ` +
  `Its origin is the canonical repository, read-only at ${MNT}/.origins/${r.name}.`,
  ...(r.rw
    ? [`  Commit your work there. To land it on ${r.defaultBranch ?? "the default branch"}, call knowledge_push: it lands a fast-forward only` +
      `${r.protect.length > 0 ? `, never a change to ${r.protect.join(", ")}` : ""}. ` +
      `Whatever you do not land is kept for review on refs/quarantine/run-<run id>, never merged.`]
    : []),
  ...(r.unlanded.some((ref) => !tainted.has(ref))
    ? [`  Not landed yet from your earlier runs (fetch them from origin to pick them up): ${r.unlanded.filter((ref) => !tainted.has(ref)).join(", ")}.`]
    : []),
  ...(tainted.size > 0
    ? [`  Held for a person's review, because the run that made it was tainted (${[...tainted].map(([ref, why]) => `${ref}: ${why}`).join("; ")}). ` +
      `Do not build on it: it lands only if a person decides so (roster runs untaint).`]
    : [])
]

/**
 * Which unlanded refs (refs/quarantine/run-<id>) are of runs still tainted, with the first reason.
 * A run whose taints cannot be read (a fleet's taint log that does not answer) is held back too.
 */
export const taintedRefs = (worker: string, unlanded: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const runLog = yield* RunLog
    const out = new Map<string, string>()
    for (const ref of unlanded) {
      const read = yield* Effect.either(runLog.readForDecision(worker, ref.slice("refs/quarantine/run-".length)))
      if (read._tag === "Left") {
        out.set(ref, "whether its run was tainted could not be read just now")
        continue
      }
      const first = read.right ? openTaints(read.right)[0] : undefined
      if (first) out.set(ref, taintLine(first))
    }
    return out as ReadonlyMap<string, string>
  })

/**
 * What the worker should know about the box it wakes up in, matching what is mounted. Stable
 * across runs (so it caches) while nothing waits in quarantine.
 */
export const briefing = (mounts: ReadonlyArray<MountRule>, repos: ReadonlyArray<BriefedRepo> = [], channel: string | null = null) =>
  [
    "## Your box",
    `You run inside a locked-down container. Your home is ${PIHOME}; you start in ${WORKSPACE}, which is fresh for this run.`,
    `- ${STORE}: your durable store. What you keep here is there next run (snapshots are taken after each run).`,
    `- ${SELF}: read-only: your own configuration, journal and past runs.`,
    ...mounts.filter((m) => !(m.kind === "repo" && m.gated)).map(mountLine),
    ...repos.flatMap(repoLines),
    ...(channel !== null
      ? [`- ${CHANNEL}: the channel "${channel}" (read-only): its recent messages in ${CHANNEL}/history.jsonl; ${CHANNEL}/store is yours to keep notes for this channel across runs.`]
      : []),
    "- The network: only through roster's gateway (already set as your HTTP(S) proxy). Hosts not granted to you are refused.",
    "- You hold no real credentials; where a credential is needed the gateway supplies it in transit.",
    "- Time: a run has a ceiling (minutes in $ROSTER_CEILING_MIN) after which the box is stopped; save work as you go."
  ].join("\n")

/** The system prompt: the worker's identity, then its box. The same text for a warm box and the run that claims it. */
export const systemPromptOf = (identity: string, mounts: ReadonlyArray<MountRule>, repos: ReadonlyArray<BriefedRepo> = [], channel: string | null = null) =>
  `${identity.trim()}\n\n${briefing(mounts, repos, channel)}`

/**
 * The system prompt a run of `worker` gets now: its identity and its box, with what waits in its
 * gated repos (unlanded work, tainted work held for a person). A warm box is made with it and is
 * taken only while a run would get the same (warmDigest), so the box and the run's context.json agree.
 */
export const systemPromptFor = Effect.fn("context.systemPrompt")(function*(
  worker: string,
  identity: string,
  mounts: ReadonlyArray<MountRule>,
  channel: string | null
) {
  const repos: Array<BriefedRepo> = []
  for (const r of yield* repoNotes(worker, mounts)) repos.push({ ...r, tainted: yield* taintedRefs(worker, r.unlanded) })
  return systemPromptOf(identity, mounts, repos, channel)
})

/**
 * A stable key for the provider's prompt cache and pi's session id: the same worker with the
 * same system prompt routes to the same cache, whatever the run.
 */
export const routeKey = (worker: string, systemPrompt: string) =>
  `roster-pc-${crypto.createHash("sha256").update(`${worker}\0${systemPrompt}`).digest("hex").slice(0, 16)}`

/**
 * The Start phase: system prompt (identity and box: stable, so a worker's route key stays the same
 * as its memory grows), and the Start input — surface and origin in one plain sentence, where the
 * answer goes, what it continues, the worker's memory, then the prompt. Traced to context.json
 * beside run.json.
 */
export const compileContext = Effect.fn("context.compile")(function*(req: ContextRequest, traceFile: string) {
  // A warm box's run brings the one its box was made with (checked equal to what it would get now).
  const system = req.system ?? (yield* systemPromptFor(req.worker, yield* readIdentity(req.worker), req.mounts, req.channel ?? null))
  const entries = yield* (yield* MemoryStore).list(req.worker).pipe(
    Effect.catchAll((e) => Effect.logWarning(`run ${req.runId}: the memory of ${req.worker} could not be read (${e.message}); briefed without it`).pipe(Effect.as([])))
  )
  const memory = memoryBlock(briefable(entries, req.channel ?? null), req.briefMax ?? 8000)
  const preamble = [
    surfaceSentence(req.surface, req.origin, req.chat),
    replySentence(req.replyTo ?? null),
    continuesSentence(req.continues ?? null),
    interruptedSentence(req.interrupted ?? null),
    memory.text
  ].filter((x): x is string => x !== undefined).join("\n\n")
  const compiled: CompiledContext = {
    system_prompt: system,
    input_prompt: req.prompt === null ? null : `${preamble}\n\n## Your task\n${promptBlock(req.prompt)}`,
    start_preamble: preamble,
    cache: { route_key: routeKey(req.worker, system) },
    memory_briefed: memory.ids
  }
  yield* writeJson(traceFile, { run_id: req.runId, worker: req.worker, surface: req.surface, phase: "start", ...compiled })
  return compiled
})
