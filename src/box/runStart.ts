import { Clock, Effect, Schema } from "effect"
import { Paths, layout } from "../config/Paths.js"
import type { MountRule, Org } from "../config/schema.js"
import { type ChatPlace, chargedChannel, type RunOrigin } from "../contract/origin.js"
import type { RunContext, Surface } from "../contract/runContext.js"
import { runFiles } from "../contract/runFiles.js"
import { readJsonOptional } from "../fs/atomic.js"
import { openRunRecord } from "../run/record.js"
import { saveRunContext } from "../run/runContext.js"
import type { RunRecord } from "../run/RunLog.js"
import { compileContext } from "./context.js"
import { inheritTaints, taintSources, unknownTaints } from "./inheritTaint.js"
import { leftBehind } from "./storeTaint.js"
import { channelSpeakers } from "../journal/channel.js"
import type { Interruption } from "../contract/interruption.js"

/** A run to continue that cannot be: its folder, its session or its record is missing. */
export class NothingToContinue extends Schema.TaggedError<NothingToContinue>()("NothingToContinue", { runId: Schema.String, detail: Schema.String }) {
  override get message() {
    return `run ${this.runId} cannot be continued: ${this.detail} — queue the work as a new task instead (roster task add)`
  }
}

/** What a run is, before anything of it exists: who, what kind, where, for whom, and what it continues. */
export interface RunStartRequest {
  readonly runId: string
  readonly worker: string
  readonly kind: RunRecord["kind"]
  readonly taskId: string | null
  readonly surface: Surface
  readonly origin: RunOrigin
  /** A one-shot run's prompt; null for a session (its first message is its first input). */
  readonly prompt: string | null
  readonly mounts: ReadonlyArray<MountRule>
  readonly channel: string | null
  readonly chat?: ChatPlace | undefined
  readonly replyTo: string | null
  readonly continues: { readonly task_id: string | null; readonly run_id: string } | null
  /** The run roster's own interruption ended, which this one carries on from. */
  readonly interrupted?: Interruption | null
  readonly org: Org
  /** The system prompt its warm box was made with (checked to be what the run gets now). */
  readonly system?: string | undefined
}

const TracedRoute = Schema.Struct({ cache: Schema.Struct({ route_key: Schema.String }) })

/** The pi session a continuation resumes: the previous run's session folder and the session id it ran under. */
const sessionToResume = (worker: string, runId: string) =>
  Effect.gen(function*() {
    const runDir = layout(yield* Paths).runDir(worker, runId)
    const traced = Schema.decodeUnknownOption(TracedRoute)(yield* readJsonOptional(runFiles(runDir).context))
    if (traced._tag === "None") return yield* Effect.fail(new NothingToContinue({ runId, detail: "its context.json (and so its session id) is missing" }))
    return { dir: `${runFiles(runDir).home}/session`, sessionId: traced.value.cache.route_key }
  })

/**
 * The one prologue of every run — one-shot, task and session: the run record opened (finished
 * from the scope's Exit), the Start context compiled and traced, and the run context saved
 * host-side before any box exists — a save that fails ends the run here, with no box, no token.
 * A continuation finds the session it resumes.
 */
export const startRun = Effect.fn("run.start")(function*(req: RunStartRequest) {
  const record = yield* openRunRecord({ runId: req.runId, worker: req.worker, kind: req.kind, ...(req.taskId ? { taskId: req.taskId } : {}) })
  const resume = req.continues ? yield* sessionToResume(req.worker, req.continues.run_id) : undefined
  // The channel's history is the run's to read (its /pihome/channel, a chat session's first turn): its speakers' taint is the run's.
  const spoken = req.channel === null ? { speakers: [], unknown: [] } : yield* channelSpeakers(req.channel)
  const heard = spoken.speakers.map((s) => ({ ...s, via: "words" as const, where: `channel ${req.channel}'s history` }))
  // What tainted runs left behind for it: a store they changed, the prompts they queued in its schedule.
  const left = yield* leftBehind(req.worker, req.channel, req.runId)
  const direct = taintSources(req.worker, req.origin, req.continues)
  const sources = [...direct, ...heard, ...left.sources.filter((s) => !direct.some((d) => d.runId === s.runId))]
  const taints = [...yield* inheritTaints(req.worker, req.runId, sources), ...yield* unknownTaints(req.worker, req.runId, [...spoken.unknown, ...left.unknown])]
  const context = yield* compileContext({
    runId: req.runId,
    worker: req.worker,
    surface: req.surface,
    origin: req.origin,
    prompt: req.prompt,
    mounts: req.mounts,
    channel: req.channel,
    chat: req.chat,
    replyTo: req.replyTo,
    continues: req.continues,
    interrupted: req.interrupted ?? null,
    briefMax: req.org.memory.brief_max,
    system: req.system
  }, runFiles(record.runDir).context)
  if (req.channel !== null) yield* record.note({ channel: req.channel })
  const chatChannel = chargedChannel(req.origin)
  const saved: RunContext = {
    run_id: req.runId,
    worker: req.worker,
    surface: req.surface,
    ...(req.chat ? { chat: req.chat } : {}),
    origin: req.origin,
    task_id: req.taskId,
    channel: req.channel,
    reply_to: req.replyTo,
    continues: req.continues,
    taints,
    ...(chatChannel ? { chat_channel: chatChannel } : {}),
    memory_briefed: context.memory_briefed,
    turns: 0,
    saved_at: new Date(yield* Clock.currentTimeMillis).toISOString()
  }
  yield* saveRunContext(saved)
  return {
    record,
    context,
    /** The pi session id: a continuation keeps the one it resumes. */
    sessionId: resume?.sessionId ?? context.cache.route_key,
    resumeFrom: resume?.dir,
    runContext: saved,
    /** The chat channel whose budget its spending counts against, if any (its token says so to the gateway). */
    chatChannel
  }
})
