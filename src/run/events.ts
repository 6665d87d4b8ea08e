import { FileSystem } from "@effect/platform"
import { Effect, Schema } from "effect"
import * as path from "node:path"
import { runFiles } from "../contract/runFiles.js"
import { KnowledgePush } from "../contract/knowledge.js"
import { PreflightResult } from "../contract/preflight.js"
import { Taint, Untaint } from "../contract/taint.js"
import { namesIn } from "../fs/namesIn.js"
import { isNotFound } from "../fs/notFound.js"

/**
 * What the gateway (and a person) learn about a run while another process holds its run.json:
 * appended one line each to events.jsonl, never read-modify-written. A run.json rewrite by the
 * runner (its notes, its end) can then never drop a taint, a warning or a push.
 */
export const RunEvent = Schema.Union(
  Schema.Struct({ kind: Schema.Literal("taint"), taint: Taint }),
  Schema.Struct({ kind: Schema.Literal("untaint"), untaint: Untaint }),
  Schema.Struct({ kind: Schema.Literal("warning"), text: Schema.String }),
  Schema.Struct({ kind: Schema.Literal("knowledge_push"), push: KnowledgePush }),
  /** One model answer: its tokens and estimated cost (the gateway's meter). */
  Schema.Struct({
    kind: Schema.Literal("usage"), model: Schema.String, input: Schema.Number, output: Schema.Number,
    cache_read: Schema.Number, cache_write: Schema.Number, usd: Schema.Number
  }),
  /**
   * The run was stopped from outside its runner — by the gateway for a budget, by its fleet node
   * once the fleet had fenced it, or by its node cut off from the fleet's database: its end is
   * recorded as this, whatever the box's exit.
   */
  Schema.Struct({ kind: Schema.Literal("stop"), by: Schema.Literal("budget", "fenced", "cut-off", "tainted"), detail: Schema.String }),
  /** The box's preflight as the gateway decided it (the box's report, or none in time). */
  Schema.Struct({ kind: Schema.Literal("preflight"), result: PreflightResult })
)
export type RunEvent = typeof RunEvent.Type

const decodeLine = Schema.decodeUnknownOption(Schema.parseJson(RunEvent))

/** The events file's reads and appends through a file system taken once (a store's, when its layer is built). */
export const eventsIn = (fs: FileSystem.FileSystem) => {
  /** Several events in one write, in order (one open and close for all of them). */
  const appendEvents = (file: string, events: ReadonlyArray<RunEvent>) =>
    fs.writeFileString(file, events.map((e) => `${JSON.stringify(e)}\n`).join(""), { flag: "a", mode: 0o644 })
  /**
   * The run's events in order; a torn or unknown line is skipped, and a run with no events file has none.
   * A file that is there and cannot be read is not "no events": its taints would be lost, and the run read
   * as clean. It reads as one taint (`unreadable`) saying so, so the run's work waits for a person.
   */
  const readEvents = (file: string) =>
    fs.readFileString(file).pipe(
      Effect.map((text) => text.split("\n").flatMap((l) => {
        const e = decodeLine(l)
        return e._tag === "Some" ? [e.value] : []
      })),
      Effect.catchIf(isNotFound, () => Effect.succeed([] as Array<RunEvent>)),
      Effect.catchAll((e) => Effect.succeed<Array<RunEvent>>([{
        kind: "taint",
        taint: { reason: "unreadable", host: null, time: new Date(0).toISOString(), detail: `its events (${file}) could not be read (${e.message}): what it did is not known` }
      }]))
    )
  /**
   * Every event of a run folder: events.jsonl (one machine's, or an older run's), then each fleet
   * node's own file in name order. Only a fleet run (its record names a node) has node files, so a
   * single machine's read stays one file, no directory listing.
   */
  const readRunEvents = (runDir: string, fleetRun: boolean) =>
    Effect.gen(function*() {
      const own = yield* readEvents(runFiles(runDir).events)
      if (!fleetRun) return own
      const names = (yield* namesIn(fs, runDir, "a run's folder (its nodes' events files)")).filter((n) => NODE_EVENTS.test(n)).sort()
      const others = yield* Effect.forEach(names, (n) => readEvents(path.join(runDir, n)))
      return [...own, ...others.flat()]
    })
  return {
    appendEvents,
    /** Appends one event (a single write: whole lines, whatever else appends at once). */
    appendEvent: (file: string, event: RunEvent) => appendEvents(file, [event]),
    readEvents,
    readRunEvents
  }
}

/** A fleet node's own events file in a run folder: events.<node>.jsonl. */
const NODE_EVENTS = /^events\.[^/]+\.jsonl$/

/** A run's model usage: tokens in, out and through the cache, answers, and the estimated cost. */
export const RunUsage = Schema.Struct({
  input_tokens: Schema.Number,
  output_tokens: Schema.Number,
  cache_read_tokens: Schema.Number,
  cache_write_tokens: Schema.Number,
  answers: Schema.Number,
  usd: Schema.Number,
  models: Schema.Array(Schema.String)
})
export type RunUsage = typeof RunUsage.Type

export const RunStopped = Schema.Struct({ by: Schema.Literal("budget", "fenced", "cut-off", "tainted"), detail: Schema.String })

export interface EventFields {
  readonly usage?: RunUsage
  readonly stopped?: typeof RunStopped.Type
  readonly preflight?: PreflightResult
  readonly tainted?: ReadonlyArray<Taint>
  readonly untainted?: Untaint
  readonly warnings?: ReadonlyArray<string>
  readonly knowledge_pushes?: ReadonlyArray<KnowledgePush>
}

/** The record's event-kept fields, from its events (run.json's own copies are what an earlier read saw). */
export const foldEvents = (events: ReadonlyArray<RunEvent>): EventFields => {
  const tainted: Array<Taint> = []
  const warnings: Array<string> = []
  const pushes: Array<KnowledgePush> = []
  let untainted: Untaint | undefined
  let usage: RunUsage | undefined
  let stopped: typeof RunStopped.Type | undefined
  let preflight: PreflightResult | undefined
  for (const e of events) {
    if (e.kind === "taint") tainted.push(e.taint)
    // The latest decision, by its time: two people's untaints on two nodes are in two files, read in name order.
    else if (e.kind === "untaint") untainted = untainted && untainted.at > e.untaint.at ? untainted : e.untaint
    else if (e.kind === "warning") {
      if (!warnings.includes(e.text)) warnings.push(e.text)
    }
    else if (e.kind === "usage") {
      const u = usage ?? { input_tokens: 0, output_tokens: 0, cache_read_tokens: 0, cache_write_tokens: 0, answers: 0, usd: 0, models: [] }
      usage = {
        input_tokens: u.input_tokens + e.input, output_tokens: u.output_tokens + e.output, cache_read_tokens: u.cache_read_tokens + e.cache_read,
        cache_write_tokens: u.cache_write_tokens + e.cache_write, answers: u.answers + 1, usd: u.usd + e.usd,
        models: u.models.includes(e.model) ? u.models : [...u.models, e.model]
      }
    } else if (e.kind === "stop") {
      // The first stop says why, except that a fence found after a cut-off is the stronger word: the task is another's.
      if (stopped === undefined || (stopped.by === "cut-off" && e.by === "fenced")) stopped = { by: e.by, detail: e.detail }
    }
    else if (e.kind === "preflight") preflight ??= e.result
    else pushes.push(e.push)
  }
  return {
    ...(tainted.length > 0 ? { tainted } : {}),
    ...(untainted ? { untainted } : {}),
    ...(warnings.length > 0 ? { warnings } : {}),
    ...(pushes.length > 0 ? { knowledge_pushes: pushes } : {}),
    ...(usage ? { usage } : {}),
    ...(stopped ? { stopped } : {}),
    ...(preflight ? { preflight } : {})
  }
}
