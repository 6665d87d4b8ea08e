import { Effect, Either, Schema } from "effect"
import { OrgConfig } from "../../config/OrgConfig.js"
import { openTaints, taintLine } from "../../contract/taint.js"
import { type MemoryScope, MemoryScope as MemoryScopeSchema, MemoryStore } from "../../memory/MemoryStore.js"
import { RunLog } from "../../run/RunLog.js"
import type { ActionAnswer, BoxCaller } from "./actionTypes.js"

const Remember = Schema.parseJson(Schema.Struct({ text: Schema.String, scope: Schema.optional(Schema.String) }))
const Forget = Schema.parseJson(Schema.Struct({ id: Schema.String }))

const refused = (status: number, error: string): ActionAnswer => ({ status, body: { ok: false, error } })

/**
 * Which scope a run may write: its worker's own, or the channel the run itself serves — never
 * another channel's (a worker reads and writes only what it is mapped to).
 */
const scopeFor = (asked: string | undefined, channel: string | undefined): Either.Either<MemoryScope, string> => {
  if (asked === undefined || asked === "worker") return Either.right("worker")
  const decoded = Schema.decodeUnknownEither(MemoryScopeSchema)(asked)
  if (Either.isLeft(decoded)) return Either.left(`scope is "worker" or "channel:<name>", not "${asked}"`)
  if (channel === undefined || decoded.right !== `channel:${channel}`) {
    return Either.left(channel === undefined
      ? "this run serves no channel: remember it for yourself (scope \"worker\")"
      : `this run serves channel ${channel}: its scope is "channel:${channel}" (or "worker")`)
  }
  return Either.right(decoded.right)
}

/**
 * remember { text, scope? }: an entry in the worker's host-side memory. Worker and run come from
 * the token; the bounds are `[memory]`'s; a tainted run's entry is held (pending) until a person
 * accepts it. Answers the entry's id, or the refusal in words the agent can act on.
 */
export const rememberAction = (caller: BoxCaller, body: string) =>
  Effect.gen(function*() {
    const decoded = Schema.decodeUnknownEither(Remember)(body)
    if (Either.isLeft(decoded)) return refused(400, `the body is {"text": "...", "scope"?: "worker" | "channel:<name>"}`)
    // Whether the entry is held for review rests on the run's taints: they must be known.
    const read = yield* Effect.either((yield* RunLog).readForDecision(caller.worker, caller.runId))
    if (Either.isLeft(read)) return refused(503, read.left.message)
    const run = read.right
    if (!run) return refused(409, "this run has no record: nothing it remembers could be traced to it")
    const scope = scopeFor(decoded.right.scope, run.channel)
    if (Either.isLeft(scope)) return refused(403, scope.left)
    const org = yield* (yield* OrgConfig).snapshot.pipe(Effect.either)
    if (Either.isLeft(org)) return refused(500, "the deployment's org.toml cannot be read (see the daemon's log)")
    const taint = openTaints(run).at(-1)
    const added = yield* (yield* MemoryStore).add(caller.worker, {
      text: decoded.right.text,
      scope: scope.right,
      runId: caller.runId,
      pending: taint !== undefined
    }, org.right.memory).pipe(Effect.either)
    if (Either.isLeft(added)) {
      const e = added.left
      return e._tag === "MemoryRefused" ? refused(e.status, e.message) : refused(500, "the memory could not be written (see the daemon's log)")
    }
    yield* Effect.logInfo(`gateway: run ${caller.runId} of ${caller.worker} remembered ${added.right.id}${added.right.pending ? " (pending: the run is tainted)" : ""}`)
    return {
      status: 200,
      body: {
        ok: true,
        id: added.right.id,
        pending: added.right.pending,
        ...(taint ? { note: `held for a person's review, because this run is tainted (${taintLine(taint)}): it is not briefed until accepted (roster memory accept)` } : {})
      }
    } satisfies ActionAnswer
  })

/** forget { id }: removes an entry of the worker's own memory (a tainted run may not: a person can). */
export const forgetAction = (caller: BoxCaller, body: string) =>
  Effect.gen(function*() {
    const decoded = Schema.decodeUnknownEither(Forget)(body)
    if (Either.isLeft(decoded)) return refused(400, `the body is {"id": "m-xxxxxxxx"}`)
    const read = yield* Effect.either((yield* RunLog).readForDecision(caller.worker, caller.runId))
    if (Either.isLeft(read)) return refused(503, read.left.message)
    const run = read.right
    const taint = run ? openTaints(run).at(-1) : undefined
    if (taint) return refused(403, `this run is tainted (${taintLine(taint)}): it cannot forget; a person can (roster memory forget ${caller.worker} ${decoded.right.id})`)
    const memory = yield* MemoryStore
    const entry = (yield* memory.list(caller.worker)).find((e) => e.id === decoded.right.id)
    if (entry && entry.scope !== "worker" && entry.scope !== `channel:${run?.channel ?? ""}`) {
      return refused(403, `${entry.id} belongs to ${entry.scope}, which this run does not serve`)
    }
    const gone = yield* memory.forget(caller.worker, decoded.right.id, `run ${caller.runId}`).pipe(Effect.either)
    if (Either.isLeft(gone)) return gone.left._tag === "MemoryRefused" ? refused(gone.left.status, gone.left.message) : refused(500, "the memory could not be written")
    yield* Effect.logInfo(`gateway: run ${caller.runId} of ${caller.worker} forgot ${gone.right.id}`)
    return { status: 200, body: { ok: true, id: gone.right.id } } satisfies ActionAnswer
  }).pipe(Effect.catchAll((e) => Effect.logWarning(`gateway: forget of run ${caller.runId}: ${e.message}`).pipe(Effect.as(refused(500, "the memory could not be read")))))
