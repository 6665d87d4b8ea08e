import { answerWithin } from "../contract/answerWithin.js"
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { ChannelName, RunId, TaskId, WorkerName } from "../config/names.js"
import { FileSystem, Path } from "@effect/platform"
import { Paths, layout } from "../config/Paths.js"
import { KnowledgePush, KnowledgeResult } from "../contract/knowledge.js"
import { PreflightResult } from "../contract/preflight.js"
import { runFiles } from "../contract/runFiles.js"
import { Taint, Untaint } from "../contract/taint.js"
import { eventsIn, foldEvents, type RunEvent, RunStopped, RunUsage } from "./events.js"
import { atomicIn, readJsonIn } from "../fs/atomic.js"
import { RunIndex } from "./RunIndex.js"
import { isTaintEvent, type TaintEvent, TaintLog, TaintLogError } from "./TaintLog.js"
import { isNotFound } from "../fs/notFound.js"

/** What ended a run: its own exit, a ceiling, a signal, an error, idleness, its owner's death, a cancel. */
export const EndedBy = Schema.Literal(
  "exit", "ceiling", "signal", "error", "idle", "closed", "session-ceiling", "turn-ceiling", "box-died",
  "orphaned", "cancelled", "budget", "fenced", "cut-off", "tainted"
)
export type EndedBy = typeof EndedBy.Type

/** A run's `run.json`: who, what kind, when, how it ended, and what it did (snapshot, repos, messages, tasks). */
export const RunRecord = Schema.Struct({
  run_id: RunId,
  worker: WorkerName,
  kind: Schema.Literal("box", "task", "session"),
  task_id: Schema.NullOr(TaskId),
  started_at: Schema.String,
  finished_at: Schema.NullOr(Schema.String),
  ended_by: Schema.NullOr(EndedBy),
  exit_code: Schema.NullOr(Schema.Number),
  error: Schema.NullOr(Schema.String),
  container: Schema.optional(Schema.String),
  /** The process the box must not outlive (the daemon's reaper checks it): a process of `node`'s machine. */
  owner: Schema.optional(Schema.Struct({ pid: Schema.Number, start: Schema.String })),
  /** Under [cluster]: the node whose machine ran the box (its audit log holds the run's requests). */
  node: Schema.optional(Schema.String),
  /** The box's egress self-test, run beside pi: the gateway answers as this deployment, and there is no way out around it. */
  preflight: Schema.optional(PreflightResult),
  /** Finished by a daemon that found the box after its owner was gone. */
  adopted: Schema.optional(Schema.Boolean),
  image: Schema.optional(Schema.String),
  /** The OCI runtime the box ran under: runsc (gVisor) or runc. */
  runtime: Schema.optional(Schema.Literal("runsc", "runc")),
  ceiling_min: Schema.optional(Schema.Number),
  /** Whether the run took a warm box (made ready before it was asked for) or started its own. */
  warm: Schema.optional(Schema.Boolean),
  /** The run id the warm box it took was made under: the box, its folder and its clones were renamed to this run's. */
  warm_box: Schema.optional(Schema.String),
  /** The engine refused the kill at its ceiling (or stop), with what it said: the box may have outlived it until the reaper found it. */
  kill_error: Schema.optional(Schema.String),
  /** When its ceiling ends it: the box's deadline label and its runner's timer, one moment (read just before the box was made). */
  deadline: Schema.optional(Schema.String),
  /** The snapshot folder, null when nothing changed, or "interrupted" when a second Ctrl-C or the time limit cut it. */
  store_snapshot: Schema.optional(Schema.NullOr(Schema.String)),
  store_snapshot_error: Schema.optional(Schema.String),
  /** pi's last assistant text, its stop reason, and what the box sent its person (message_user). */
  final_text: Schema.optional(Schema.NullOr(Schema.String)),
  stop_reason: Schema.optional(Schema.NullOr(Schema.String)),
  messages: Schema.optional(Schema.Array(Schema.String)),
  /** How each gated repo ended: quarantined, landed or unchanged (the backstop), and each knowledge_push. */
  knowledge: Schema.optional(Schema.Array(KnowledgeResult)),
  knowledge_pushes: Schema.optional(Schema.Array(KnowledgePush)),
  /** The channel the run served (`--channel`). */
  channel: Schema.optional(ChannelName),
  /** What the run should know it did wrong, once each (a request that left with a sentinel, say). Never a real value. */
  warnings: Schema.optional(Schema.Array(Schema.String)),
  /** Why the gateway stopped trusting this run's work (refused egress, a sentinel sent upstream, a budget); kept quarantined. */
  tainted: Schema.optional(Schema.Array(Taint)),
  /** A person's decision to land a tainted run's work anyway (`roster runs untaint`). */
  untainted: Schema.optional(Untaint),
  /** The model answers the gateway metered for this run: tokens and estimated USD. */
  usage: Schema.optional(RunUsage),
  /** Set when the gateway stopped the run (a spend budget): it ends as `ended_by` this. */
  stopped: Schema.optional(RunStopped),
  /** Follow-up tasks the run queued for its worker (set_tasks). */
  queued_tasks: Schema.optional(Schema.Array(TaskId)),
  /** A chat session's turns that ended with an answer no send tool carried, and what was done with each (`[[chat]] unsent`). */
  undelivered: Schema.optional(Schema.Array(Schema.Struct({
    turn: Schema.Number,
    chars: Schema.Number,
    handled: Schema.Literal("notice", "post", "drop"),
    /** The post (the notice, or the text) did not go out: the message is marked unanswered. */
    post_failed: Schema.optional(Schema.Literal(true))
  })))
})
export type RunRecord = typeof RunRecord.Type

/** A run record that could not be written. */
export class RunLogError extends Schema.TaggedError<RunLogError>()("RunLogError", {
  file: Schema.String,
  detail: Schema.String
}) {
  override get message() {
    return `cannot write the run record ${this.file}: ${this.detail}`
  }
}

export interface RunStart {
  readonly runId: string
  readonly worker: string
  readonly kind: RunRecord["kind"]
  readonly taskId?: string
  /** The process the run belongs to, recorded from its first write: a run killed before its box exists is still known as whose. */
  readonly owner?: { readonly pid: number; readonly start: string }
}

export interface RunEnd {
  readonly endedBy: EndedBy
  readonly exitCode: number | null
  readonly error?: string
  readonly extra?: Partial<RunRecord>
}

const now = Clock.currentTimeMillis.pipe(Effect.map((ms) => new Date(ms).toISOString()))

/** A run folder's reads through a file system taken once (a store's, when its layer is built). */
const runReadsIn = (fs: FileSystem.FileSystem) => {
  const readJson = readJsonIn(fs)
  const { readRunEvents } = eventsIn(fs)
  const readRunJson = (runDir: string) => Effect.map(readJson(runFiles(runDir).record), Schema.decodeUnknownOption(RunRecord))
  const readRunDir = (runDir: string, shared: ReadonlyArray<TaintEvent> = []) =>
    Effect.gen(function*() {
      const decoded = yield* readRunJson(runDir)
      if (decoded._tag === "None") return undefined
      const events = yield* readRunEvents(runDir, decoded.value.node !== undefined)
      return { ...decoded.value, ...foldEvents(withShared(events, shared)) } satisfies RunRecord
    })
  return { readRunJson, readRunDir }
}

const runReads = Effect.map(FileSystem.FileSystem, runReadsIn)

/** A run folder's run.json alone, as written (none when missing or unreadable): its events not read. */
export const readRunJson = (runDir: string) => Effect.flatMap(runReads, (r) => r.readRunJson(runDir))

/**
 * A run folder's record with what its events say (see events.ts), and a fleet run's taints and
 * untaints from the fleet's taint log (`shared`); undefined without a readable run.json.
 */
export const readRunDir = (runDir: string, shared: ReadonlyArray<TaintEvent> = []) =>
  Effect.flatMap(runReads, (r) => r.readRunDir(runDir, shared))

/**
 * The folder's events with the taint log's: the decisions in the order they were made. A fleet
 * node writes a taint to its events file only while the database does not take it, so both can
 * hold some of one run's — in time order an untaint's count of the taints it saw stays true.
 */
const withShared = (events: ReadonlyArray<RunEvent>, shared: ReadonlyArray<TaintEvent>): ReadonlyArray<RunEvent> => {
  if (shared.length === 0) return events
  const at = (e: TaintEvent) => (e.kind === "taint" ? e.taint.time : e.untaint.at)
  const decisions = [...events.filter(isTaintEvent), ...shared].map((e, i) => ({ e, i }))
    .sort((x, y) => (at(x.e) < at(y.e) ? -1 : at(x.e) > at(y.e) ? 1 : x.i - y.i))
  return [...events.filter((e) => !isTaintEvent(e)), ...decisions.map((d) => d.e)]
}

/** What a run log works through, taken when its layer is built. */
interface RunFiles {
  readonly fs: FileSystem.FileSystem
  readonly path: Path.Path
  readonly paths: Context.Tag.Service<Paths>
}

const runFilesOf = Effect.all({ fs: FileSystem.FileSystem, path: Path.Path, paths: Paths })

/** `run.json` of each run: written at start, rewritten at the end, never lost to a half write. Its deployment and file system are taken when its layer is built. */
export class RunLog extends Context.Tag("roster/RunLog")<RunLog, {
  readonly start: (run: RunStart) => Effect.Effect<RunRecord, RunLogError>
  readonly update: (worker: string, runId: string, patch: Partial<RunRecord>) => Effect.Effect<void, RunLogError>
  readonly finish: (worker: string, runId: string, end: RunEnd) => Effect.Effect<RunRecord, RunLogError>
  readonly read: (worker: string, runId: string) => Effect.Effect<RunRecord | undefined>
  /**
   * A read a decision rests on (may the run's work land, what an untaint clears): a fleet run's
   * taints must be known, so a taint log that does not answer fails it rather than leave them out.
   */
  readonly readForDecision: (worker: string, runId: string) => Effect.Effect<RunRecord | undefined, TaintLogError>
  /** Adds what was learnt of a run from outside its runner (a taint, a warning, a push): appended, never lost to a rewrite. */
  readonly append: (worker: string, runId: string, event: RunEvent) => Effect.Effect<void, RunLogError>
  /** Several events of one run, in order, in one write (the gateway's usage notes of a moment); a taint among them goes as `append`'s. */
  readonly appendAll: (worker: string, runId: string, events: ReadonlyArray<RunEvent>) => Effect.Effect<void, RunLogError>
}>() {
  /**
   * A fleet node's run records: each also goes to a {@link RunIndex} as it starts and ends, and
   * its taints and untaints to the fleet's {@link TaintLog}.
   */
  static readonly layerIndexed = Layer.effect(RunLog, Effect.gen(function*() {
    return makeRunLog(yield* runFilesOf, (yield* RunIndex).put, yield* TaintLog)
  }))

  /** Run records in their folders, listed by reading them (a machine on its own). */
  static readonly layer = Layer.effect(RunLog, Effect.map(runFilesOf, (files) => makeRunLog(files, () => Effect.void, undefined)))
}

const makeRunLog = (
  { fs, path, paths }: RunFiles,
  indexed: (record: RunRecord) => Effect.Effect<void>,
  taintLog: Context.Tag.Service<TaintLog> | undefined
): Context.Tag.Service<RunLog> => {
  const node = paths.fleet?.node
  const where = layout(paths)
  const { writeJson } = atomicIn(fs, path)
  const { appendEvent, appendEvents } = eventsIn(fs)
  const { readRunDir } = runReadsIn(fs)
  const recordFile = (worker: string, runId: string) => runFiles(where.runDir(worker, runId)).record
  /** Where this process appends a run's events: a fleet node to its own file (see runFiles). */
  const eventsFile = (worker: string, runId: string) => {
    const files = runFiles(where.runDir(worker, runId))
    return node !== undefined ? files.nodeEvents(node) : files.events
  }
  const writeRecord = (file: string, record: RunRecord) =>
    writeJson(file, record).pipe(Effect.mapError((e) => new RunLogError({ file, detail: e.message })))
  const readRecord = (worker: string, runId: string, shared?: ReadonlyArray<TaintEvent>) =>
    readRunDir(where.runDir(worker, runId), shared)
  const modifyRecord = (worker: string, runId: string, f: (r: RunRecord) => Effect.Effect<RunRecord>) =>
    Effect.gen(function*() {
      const file = recordFile(worker, runId)
      const current = yield* readRecord(worker, runId)
      if (!current) return yield* Effect.fail(new RunLogError({ file, detail: "no run record to update" }))
      const next = yield* f(current)
      yield* writeRecord(file, next)
      return next
    })
  const shared = node !== undefined ? taintLog : undefined
  const readShared = (worker: string, runId: string) =>
    shared
      ? Effect.flatMap(shared.of([runId]), (m) => readRecord(worker, runId, m.get(runId)))
      : readRecord(worker, runId)
  /** A decision the database does not take in time is kept in this node's events file of the run (read by every node too). */
  const putShared = (runId: string, event: TaintEvent, file: string) =>
    shared && node
      ? shared.put(runId, node, event).pipe(
        answerWithin("2 seconds", () => new TaintLogError({ detail: "no answer in 2 s" })),
        Effect.catchAll((e) =>
          Effect.logWarning(`run ${runId}: its ${event.kind} is kept in ${file}, not the fleet's taint log (${e.detail})`).pipe(
            Effect.zipRight(appendEvent(file, event))
          ))
      )
      : appendEvent(file, event)
  const appendAll = (worker: string, runId: string, events: ReadonlyArray<RunEvent>) =>
    Effect.gen(function*() {
      const file = eventsFile(worker, runId)
      // Only whether the run is there, and only by the append itself: its folder is made with its
      // record, so a run that is not there fails the append (ENOENT). A full read (its record and
      // every event so far) made each of a long run's model answers cost as much as all the answers
      // before it; an `exists` per answer was ~5 % of a metered request's CPU (docs/PERFORMANCE.md).
      const write = events.some(isTaintEvent)
        ? Effect.forEach(events, (e) => (isTaintEvent(e) ? putShared(runId, e, file) : appendEvent(file, e)), { discard: true })
        : appendEvents(file, events)
      yield* write.pipe(
        Effect.mapError((e) =>
          new RunLogError({ file, detail: isNotFound(e) ? "no run record to add to" : e.message }))
      )
      // The worker's list of tainted runs, whose folders its other runs do not see: part of the taint's write
      // (a run tainted and not listed would be shown to them), so a failure here is the taint's failure.
      const last = [...events].reverse().find(isTaintEvent)
      if (last) yield* noteTainted(worker, runId, last.kind === "taint").pipe(Effect.mapError((e) => new RunLogError({ file, detail: e.message })))
    })
  const noteTainted = (worker: string, runId: string, tainted: boolean) =>
    Effect.gen(function*() {
      const marker = path.join(where.taintedRunsDir(worker), runId)
      if (!tainted) return yield* fs.remove(marker, { force: true })
      yield* fs.makeDirectory(where.taintedRunsDir(worker), { recursive: true })
      yield* fs.writeFileString(marker, "")
    })
  return {
    start: (run) =>
      Effect.gen(function*() {
        const record: RunRecord = {
          run_id: run.runId,
          worker: run.worker,
          kind: run.kind,
          task_id: run.taskId ?? null,
          started_at: yield* now,
          finished_at: null,
          ended_by: null,
          exit_code: null,
          error: null,
          ...(run.owner ? { owner: run.owner } : {}),
          ...(node ? { node } : {})
        }
        yield* writeRecord(recordFile(run.worker, run.runId), record)
        yield* indexed(record)
        return record
      }),
    update: (worker, runId, patch) => modifyRecord(worker, runId, (r) => Effect.succeed({ ...r, ...patch })).pipe(Effect.asVoid),
    finish: (worker, runId, end) =>
      modifyRecord(worker, runId, (r) =>
        now.pipe(Effect.map((finished_at) => ({
          ...r,
          ...end.extra,
          finished_at,
          // The gateway's stop (a budget) is why the box went, whatever its exit looked like to the runner.
          ended_by: r.stopped?.by ?? end.endedBy,
          exit_code: end.exitCode,
          error: r.stopped?.detail ?? end.error ?? null
        })))).pipe(Effect.tap(indexed)),
    read: (worker, runId) =>
      readShared(worker, runId).pipe(Effect.catchTag("TaintLogError", (e) =>
        Effect.logWarning(`run ${runId}: shown without the fleet's taint log: ${e.message}`).pipe(Effect.zipRight(readRecord(worker, runId))))),
    readForDecision: (worker, runId) => readShared(worker, runId),
    append: (worker, runId, event) => appendAll(worker, runId, [event]),
    appendAll
  }
}
