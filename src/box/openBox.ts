import { FileSystem } from "@effect/platform"
import { Effect, Fiber, Option, Ref } from "effect"
import type { WorkerSettings } from "../config/schema.js"
import { runFiles } from "../contract/runFiles.js"
import type { DockerError } from "../docker/Docker.js"
import { BoxBackend } from "../backend/BoxBackend.js"
import { type BoxPlan, containerName } from "../backend/plan.js"
import { untilHurried } from "../run/Hurry.js"
import type { OpenRecord } from "../run/record.js"
import { RunLog } from "../run/RunLog.js"
import { mintIdentity } from "./identity.js"
import { drainTo, outputCaps } from "./output.js"
import { failedPreflightLine, type PreflightResult } from "./preflight.js"
import { finishRepos } from "../knowledge/backstop.js"
import { knowledgeLine } from "../contract/knowledge.js"
import { provisionRepos } from "../knowledge/provision.js"
import { hostUser, provisionBox, type ProvisionRequest } from "./provision.js"
import { changesBetween, type Manifest, manifestOf, provisionStore, snapshotStoreAs } from "./store.js"
import { layout, Paths } from "../config/Paths.js"
import { marksOnClose } from "./storeTaint.js"

export interface BoxRequest extends Omit<ProvisionRequest, "worker" | "runId" | "runDir" | "token"> {
  /** The run this box belongs to: its record gets the container, the image and the snapshot. */
  readonly record: OpenRecord
  readonly settings: WorkerSettings
  /** Each complete line of pi's stdout as it arrives (the transcript file gets every byte regardless). */
  readonly onLine?: (line: string) => Effect.Effect<void>
  /** Which lines `onLine` wants (a one-shot run reads only pi's known events; a session's --json wants all). */
  readonly linesWanted?: (line: string) => boolean
  readonly onStderr?: (chunk: Uint8Array) => Effect.Effect<void>
  /** The chat channel the run's spending is charged to (its token names it to the gateway's meter). */
  readonly chatChannel?: string | undefined
}

/** A started box, held by the scope that opened it. */
export interface OpenBox {
  readonly id: string
  /** What it was made from (its network, image, runtime, deadline). */
  readonly plan: BoxPlan
  /** The box's exit code, once it exits (shared: await it as often as needed). */
  readonly exited: Effect.Effect<number, DockerError>
  /** Completes when the box's stdout has ended (it exited or closed it) and every line was handed on. */
  readonly stdoutEnded: Effect.Effect<void>
  /** Completes when both stdout and stderr are fully written to their files. */
  readonly drained: Effect.Effect<void>
  readonly write: (chunk: string) => Effect.Effect<void, DockerError>
  readonly closeStdin: Effect.Effect<void>
  /** Kills the box; a refusal (the engine's) is the caller's to say. */
  readonly kill: Effect.Effect<void, DockerError>
  /** The box's egress self-test, once it reported (undefined if the box never got that far). Read after the box is gone. */
  readonly preflight: Effect.Effect<PreflightResult | undefined>
}

/** What the run's record says of its box: its container, image, runtime, owner, deadline, ceiling and whether it was warm. */
export const noteBox = (record: OpenRecord, plan: BoxPlan, ceilingMin: number | null, warm: boolean, warmBox?: string) =>
  record.note({
    container: containerName(plan.runId),
    image: plan.image,
    runtime: plan.runtime,
    owner: plan.owner,
    deadline: new Date(plan.deadline).toISOString(),
    warm,
    ...(warmBox !== undefined ? { warm_box: warmBox } : {}),
    ...(ceilingMin !== null ? { ceiling_min: ceilingMin } : {})
  })

/** How long a store snapshot may take at a run's end before it is cut (a second Ctrl-C cuts it sooner). */
export const SNAPSHOT_LIMIT = "10 minutes"

/**
 * However the run ends, once its box is gone the store gets its snapshot: a finalizer, so no
 * exit path skips it; interruptible by a second Ctrl-C and bounded in time, and never fatal.
 * The record says which: the snapshot's folder, null (nothing changed), or "interrupted".
 */
type SnapshotEnd =
  | { readonly _tag: "done"; readonly dir: string | null; readonly changes: number; readonly after: Manifest }
  | { readonly _tag: "failed"; readonly message: string; readonly after?: Manifest }
  | { readonly _tag: "cut" }

/** The store at the run's end, walked once: its snapshot and the run's store marks both read this manifest. */
const snapshotEnd = <R>(record: OpenRecord, keep: number, storeNow: Effect.Effect<Manifest, unknown, R>) =>
  Effect.gen(function*() {
    const after = yield* Effect.either(storeNow)
    if (after._tag === "Left") return { _tag: "failed", message: `the store could not be read: ${messageOf(after.left)}` } satisfies SnapshotEnd
    return yield* snapshotStoreAs(record.worker, record.runId, keep, after.right).pipe(
      Effect.map((o): SnapshotEnd => ({ _tag: "done", dir: o?.dir ?? null, changes: o?.changes ?? 0, after: after.right })),
      Effect.catchAll((e) => Effect.succeed<SnapshotEnd>({ _tag: "failed", message: e.message, after: after.right }))
    )
  }).pipe(Effect.timeoutTo({ duration: SNAPSHOT_LIMIT, onTimeout: (): SnapshotEnd => ({ _tag: "cut" }), onSuccess: (x) => x }))

const messageOf = (e: unknown) => (e instanceof Error ? e.message : String(e))

const noteSnapshot = (record: OpenRecord, end: SnapshotEnd) => {
  switch (end._tag) {
    case "cut":
      return Effect.logWarning(`run ${record.runId}: the store snapshot was cut short`).pipe(
        Effect.zipRight(record.note({ store_snapshot: "interrupted" }))
      )
    case "failed":
      return Effect.logWarning(`run ${record.runId}: ${end.message}`).pipe(
        Effect.zipRight(record.note({ store_snapshot: null, store_snapshot_error: end.message }))
      )
    case "done":
      return end.dir === null ? record.note({ store_snapshot: null }) : Effect.logInfo(
        `run ${record.runId}: store snapshot (${end.changes} change${end.changes === 1 ? "" : "s"})`
      ).pipe(Effect.zipRight(record.note({ store_snapshot: end.dir })))
  }
}

// The first Ctrl-C lets the copy finish; only Hurry (the second) or the time limit cut it. A tainted run then
// marks the stores it changed (storeTaint.ts): the worker's store as it was when the run got it against its end
// (a host's edit between runs is not the run's) — not known (a store that could not be read), it is taken as changed.
export const snapshotOnClose = (record: OpenRecord, keep: number) =>
  Effect.gen(function*() {
    const store = layout(yield* Paths).storeDir(record.worker)
    const fs = yield* FileSystem.FileSystem
    // A store not made yet is an empty one (the run's box makes it); one that cannot be looked at or read fails
    // here, and is "not known" below: taken as changed.
    const storeNow = Effect.flatMap(fs.exists(store), (there) => (there ? manifestOf(store) : Effect.succeed<Manifest>({})))
    const before = yield* Effect.either(storeNow)
    yield* Effect.addFinalizer(() =>
      untilHurried(snapshotEnd(record, keep, storeNow)).pipe(
        Effect.map(Option.getOrElse((): SnapshotEnd => ({ _tag: "cut" }))),
        Effect.tap((end) => noteSnapshot(record, end)),
        Effect.flatMap((end) => {
          const after = end._tag === "cut" ? undefined : end.after
          return marksOnClose(record, before._tag === "Left" || after === undefined || changesBetween(before.right, after) > 0)
        })
      ))
  })

/** The run's gated repos at its end: unlanded work quarantined, the result in the record, the clones removed. */
export const reposOnClose = (record: Pick<OpenRecord, "worker" | "runId" | "note">) =>
  finishRepos(record.worker, record.runId).pipe(
    Effect.tap((results) => Effect.forEach(results, (r) => Effect.logInfo(`run ${record.runId}: ${knowledgeLine(r)}`))),
    Effect.flatMap((results) => (results.length === 0 ? Effect.void : record.note({ knowledge: results })))
  )

/**
 * The box's preflight as its runner sees it. A failed check's line goes to the record, not to the
 * run's readers, and stops the box at once: pi runs beside the check, and the gateway may never
 * have heard it. A passing line is not the box's to say (the check reports a pass to the gateway
 * only, and the gateway trusts its own record of it): one printed is ignored. Otherwise the
 * result is what the gateway decided from the box's report.
 */
const watchPreflight = (record: OpenRecord, kill: Effect.Effect<void>) =>
  Effect.gen(function*() {
    const runLog = yield* RunLog
    const printed = yield* Ref.make<PreflightResult | undefined>(undefined)
    return {
      line: (line: string) =>
        Option.match(failedPreflightLine(line), {
          onNone: () => Effect.void,
          onSome: (failed) => Ref.set(printed, failed).pipe(Effect.zipRight(record.note({ preflight: failed })), Effect.zipRight(kill))
        }),
      result: Ref.get(printed).pipe(Effect.flatMap((p) =>
        p ? Effect.succeed(p) : runLog.read(record.worker, record.runId).pipe(Effect.map((r) => r?.preflight))
      ))
    }
  })

/**
 * One box of one run, as a scoped resource — the one way roster opens a box (one-shot runs,
 * sessions, queued tasks). Acquired in order: the store (whose snapshot is registered first so
 * it runs last, after the box is gone), the lockdown, image and run folders, the identity
 * token, the container (created, attached, its wait armed, started). The scope's close undoes
 * each in reverse whatever the exit: the box killed and removed, the token revoked, the store
 * snapshotted.
 */
export const openBox = Effect.fn("box.open")(function*(req: BoxRequest) {
  const { record } = req
  const backend = yield* BoxBackend
  const store = yield* provisionStore(record.worker)
  yield* snapshotOnClose(record, req.settings.store.snapshots)
  // Registered before any clone exists (they are found from the host's record of them), so a
  // provisioning cut halfway still has its clones backstopped and removed.
  yield* Effect.addFinalizer(() => reposOnClose(record))
  const checkouts = yield* provisionRepos(record.worker, record.runId, req.mounts, hostUser())
  // The token first, so the plan is made whole in one place: until a box holds it, it opens nothing.
  const identity = yield* mintIdentity(record.worker, record.runId, req.taskId, req.chatChannel)
  const plan = yield* provisionBox({ ...req, worker: record.worker, runId: record.runId, runDir: record.runDir, token: identity.token }, store, checkouts)
  yield* noteBox(record, plan, req.ceilingMin, false)
  // Made and attached, not started: its output is read from its first byte before it runs.
  const box = yield* backend.open(plan)
  const files = runFiles(record.runDir)
  const caps = outputCaps(req.org.box)
  const preflight = yield* watchPreflight(record, box.kill.pipe(
    Effect.catchAll((e) => Effect.logWarning(`run ${record.runId}: its box failed its preflight and its kill was refused by the engine (${e.message}); the run's end removes it`))
  ))
  const onLine = (line: string) =>
    line.startsWith(`{"type":"roster_preflight"`) ? preflight.line(line) : req.onLine ? req.onLine(line) : Effect.void
  const out = yield* Effect.forkScoped(drainTo(box.stdout, files.transcript, { onLine, wanted: req.linesWanted, ...caps }))
  // pi's stderr is diagnostics, not conversation: it goes to stderr.log beside the transcript.
  const err = yield* Effect.forkScoped(drainTo(box.stderr, files.stderr, { onChunk: req.onStderr, ...caps }))
  yield* box.start
  return {
    id: box.id,
    plan,
    exited: box.exited,
    stdoutEnded: Fiber.join(out),
    drained: Fiber.join(out).pipe(Effect.zipRight(Fiber.join(err))),
    write: box.write,
    closeStdin: box.closeStdin,
    kill: box.kill,
    preflight: preflight.result
  } satisfies OpenBox
})

