import { FileSystem } from "@effect/platform"
import { Effect, Schema } from "effect"
import { KnowledgePush } from "../contract/knowledge.js"
import { Taint, Untaint } from "../contract/taint.js"

/**
 * What the gateway (and a person) learn about a run while another process holds its run.json:
 * appended one line each to events.jsonl, never read-modify-written. A run.json rewrite by the
 * runner (its notes, its end) can then never drop a taint, a warning or a push.
 */
export const RunEvent = Schema.Union(
  Schema.Struct({ kind: Schema.Literal("taint"), taint: Taint }),
  Schema.Struct({ kind: Schema.Literal("untaint"), untaint: Untaint }),
  Schema.Struct({ kind: Schema.Literal("warning"), text: Schema.String }),
  Schema.Struct({ kind: Schema.Literal("knowledge_push"), push: KnowledgePush })
)
export type RunEvent = typeof RunEvent.Type

const decodeLine = Schema.decodeUnknownOption(Schema.parseJson(RunEvent))

/** Appends one event (a single write: whole lines, whatever else appends at once). */
export const appendEvent = (file: string, event: RunEvent) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.writeFileString(file, `${JSON.stringify(event)}\n`, { flag: "a", mode: 0o644 }))

/** The run's events in order; a torn or unknown line is skipped. */
export const readEvents = (file: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readFileString(file)).pipe(
    Effect.map((text) => text.split("\n").flatMap((l) => {
      const e = decodeLine(l)
      return e._tag === "Some" ? [e.value] : []
    })),
    Effect.orElseSucceed((): Array<RunEvent> => [])
  )

export interface EventFields {
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
  for (const e of events) {
    if (e.kind === "taint") tainted.push(e.taint)
    else if (e.kind === "untaint") untainted = e.untaint
    else if (e.kind === "warning") {
      if (!warnings.includes(e.text)) warnings.push(e.text)
    }
    else pushes.push(e.push)
  }
  return {
    ...(tainted.length > 0 ? { tainted } : {}),
    ...(untainted ? { untainted } : {}),
    ...(warnings.length > 0 ? { warnings } : {}),
    ...(pushes.length > 0 ? { knowledge_pushes: pushes } : {})
  }
}
