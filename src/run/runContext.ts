import { FileSystem } from "@effect/platform"
import { Effect, Schema } from "effect"
import { type HostFiles, Paths, layout } from "../config/Paths.js"
import { type RunContext, RunContext as RunContextSchema } from "../contract/runContext.js"
import { readJsonOptional, writeJson } from "../fs/atomic.js"

/** The run context could not be saved: the run does not start (or, for a session's turn, the message is not delivered). */
export class RunContextError extends Schema.TaggedError<RunContextError>()("RunContextError", { file: Schema.String, detail: Schema.String }) {
  override get message() {
    return `the run context ${this.file} could not be saved: ${this.detail} — check that the data folder is writable`
  }
}

/** Writes `data/contexts/<worker>/<run-id>.json` atomically (0600: it names who asked for what). */
export const saveRunContext = (ctx: RunContext): Effect.Effect<void, RunContextError, HostFiles> =>
  Effect.gen(function*() {
    const file = layout(yield* Paths).contextFile(ctx.worker, ctx.run_id)
    yield* writeJson(file, Schema.encodeSync(RunContextSchema)(ctx), 0o600).pipe(
      Effect.mapError((e) => new RunContextError({ file, detail: e.message }))
    )
  })

/** A run's context, when it has a readable one. */
export const readRunContext = (worker: string, runId: string) =>
  Effect.gen(function*() {
    const raw = yield* readJsonOptional(layout(yield* Paths).contextFile(worker, runId))
    const decoded = Schema.decodeUnknownOption(RunContextSchema)(raw)
    return decoded._tag === "Some" ? decoded.value : undefined
  })

/**
 * The run's context, or why it cannot be had: absent (a run that saved none) is no problem; one that is
 * there and cannot be read or decoded is said, for a caller that must not take it for absent.
 */
export const readRunContextOrWhy = (worker: string, runId: string) =>
  Effect.gen(function*() {
    const file = layout(yield* Paths).contextFile(worker, runId)
    const context = yield* readRunContext(worker, runId)
    if (context !== undefined) return { context, problem: undefined }
    // A folder that cannot be looked in is taken for a context there and unreadable: said, never taken for none.
    const there = yield* (yield* FileSystem.FileSystem).exists(file).pipe(Effect.orElseSucceed(() => true))
    return { context: undefined, problem: there ? `${file} is there and cannot be read as a run context` : undefined }
  })
