import { FileSystem } from "@effect/platform"
import { Clock, Deferred, Duration, Effect, Either, Exit, Fiber, Option, Ref, Scope } from "effect"
import * as crypto from "node:crypto"
import { BoxBackend, type Isolation } from "../backend/BoxBackend.js"
import type { BoxPlan } from "../backend/plan.js"
import { Paths, layout } from "../config/Paths.js"
import type { WorkerSettings } from "../config/schema.js"
import { runFiles } from "../contract/runFiles.js"
import type { DockerError } from "../docker/Docker.js"
import { routeKey, systemPromptFor } from "./context.js"
import { type Identity, mintIdentity } from "./identity.js"
import { drainTo, outputCaps } from "./output.js"
import { failedPreflightLine } from "./preflight.js"
import { preflightPassed, type WarmBoxUnready } from "./warmReady.js"
import { type PreparedRun, prepareRun, type RunLimits } from "./prepareRun.js"
import { finishRepos } from "../knowledge/backstop.js"
import { provisionRepos } from "../knowledge/provision.js"
import { hostUser, provisionBox } from "./provision.js"
import { provisionStore } from "./store.js"

/**
 * What kind of run a warm box is made for — what its container cannot change once started: a one-shot
 * (a worker run, a task) or a session, its send tool (a chat session's, a talk's term_send), its channel.
 */
export interface WarmShape {
  readonly kind: "one-shot" | "session"
  readonly chatSend: "slack" | "discord" | null
  readonly termSend: boolean
  readonly channel: string | null
}

/** A worker run's or a queued task's shape. */
export const ONE_SHOT: WarmShape = { kind: "one-shot", chatSend: null, termSend: false, channel: null }

/**
 * A box made ready for its worker's next run before any run asked for it: started, pi
 * waiting in rpc mode for its first prompt, its token bound to no run (the gateway takes only its
 * preflight report under it). Its scope holds the box, the token and the folder; whoever takes
 * it closes that scope — a claim at its run's end, a recycle at once.
 */
export interface WarmBox {
  /**
   * The run id the box was made under (its labels; its name and folder until a run takes it). A run
   * that takes it renames its box and folders to the run's own id (`handOverWarm`).
   */
  readonly runId: string
  readonly worker: string
  readonly shape: WarmShape
  /** A digest of what it was made from: a claim takes it only while the run would be made from the same. */
  readonly madeFrom: string
  /** The id of the image it was made from: the same name rebuilt since is another image. */
  readonly imageId: string | undefined
  readonly preparedAt: number
  readonly scope: Scope.CloseableScope
  readonly identity: Identity
  readonly plan: BoxPlan
  readonly settings: WorkerSettings
  readonly box: {
    readonly id: string
    readonly exited: Effect.Effect<number, DockerError>
    readonly write: (chunk: string) => Effect.Effect<void, DockerError>
    readonly closeStdin: Effect.Effect<void>
    readonly kill: Effect.Effect<void, DockerError>
  }
  /** Where each line of pi's stdout goes from now on (nowhere until a claim says). */
  readonly lines: Ref.Ref<(line: string) => Effect.Effect<void>>
  readonly stdoutEnded: Effect.Effect<void>
  readonly drained: Effect.Effect<void>
  /** Set by the run that takes it, before its record goes in: the folder is then the run's, not removed with the box. */
  readonly claimed: Ref.Ref<boolean>
  /** The run id its box and folders go by now: its own, until a run takes it under the run's. */
  readonly goesBy: Ref.Ref<string>
  /** Why it can serve no run (it exited, its preflight failed, its token or folder is gone), once it cannot. */
  readonly spent: Effect.Effect<Option.Option<string>>
  /**
   * Once the gateway has the box's preflight, passed (at once for a box that waited long enough). A run
   * takes the box under its own run id and the gateway finds a run's preflight in the run's folder, so a
   * report still on its way under the box's old id would never reach the run.
   */
  readonly preflightIn: Effect.Effect<void, WarmBoxUnready>
}

/**
 * What a warm box is made from — its shape, the org snapshot, the worker's settings, grants and system
 * prompt (its identity and its whole briefing: its gated repos' unlanded and held work among it) — as one digest. Limits the box never sees are left out (its runner keeps them: a session's
 * idle time and ceilings, how warm boxes are kept), so a channel's own `idle_min` does not make its
 * sessions' boxes misfit; a one-shot's ceiling is in its box's environment, so it counts.
 */
export const warmDigest = (run: Pick<PreparedRun, "org" | "settings" | "mounts" | "channel" | "hidden">, shape: WarmShape, system: string) => {
  const { idle_secs: _i, session_ceiling_min: _s, turn_ceiling_min: _t, warm: _w, warm_max: _m, warm_idle_min: _d, ceiling_min, ...box } = run.org.box
  return crypto.createHash("sha256")
    .update(JSON.stringify({
      shape,
      org: { ...run.org, box: { ...box, ...(shape.kind === "one-shot" ? { ceiling_min } : {}) } },
      settings: run.settings,
      mounts: run.mounts,
      // The runs its box hides: a run tainted since the box was made is one a box made now would hide.
      hidden: run.hidden,
      system
    }))
    .digest("hex")
}

/**
 * Makes a warm box for `worker`, as a one-shot run's box would be made (the same plan, under a new
 * run id; its gated repos cloned on that run's branch) but in rpc mode and labelled `warm`; its label
 * deadline is its idle time plus a run's ceiling, the most it could live.
 */
export const prepareWarm = Effect.fn("warm.prepare")(function*(worker: string, shape: WarmShape = ONE_SHOT) {
  const run = yield* prepareRun({ worker, kind: shape.kind, channel: shape.channel })
  const scope = yield* Scope.make()
  return yield* makeWarm(run, shape).pipe(
    Scope.extend(scope),
    Effect.map((made) => Option.some<WarmBox>({ ...made, scope })),
    Effect.onExit((exit) => (Exit.isFailure(exit) ? Scope.close(scope, exit) : Effect.void))
  )
})

const makeWarm = (run: PreparedRun, shape: WarmShape) =>
  Effect.gen(function*() {
    const { org, settings, mounts, runId, worker } = run
    const fs = yield* FileSystem.FileSystem
    const place = layout(yield* Paths)
    const runDir = place.runDir(worker, runId)
    const claimed = yield* Ref.make(false)
    const goesBy = yield* Ref.make(runId)
    // Under both ids: a hand-over cut halfway leaves some of it under each.
    const untaken = <R>(f: (id: string) => Effect.Effect<unknown, unknown, R>) =>
      Effect.all([Ref.get(claimed), Ref.get(goesBy)]).pipe(Effect.flatMap(([c, now]) =>
        c ? Effect.void : Effect.forEach(new Set([runId, now]), (id) =>
          f(id).pipe(Effect.catchAll((e) => Effect.logWarning(`warm box ${runId}: what it left under ${id} could not be cleared (${e instanceof Error ? e.message : String(e)}); the sweep of boxless runs clears it`))), { discard: true })))
    // First, so it runs last: a box no run claimed leaves no folder (no run ever had it).
    yield* Effect.addFinalizer(() => untaken((id) => fs.remove(place.runDir(worker, id), { recursive: true })))
    const store = yield* provisionStore(worker)
    // Its clones go with it unless a run took it (the run's own close then backstops them): nothing was done in them.
    yield* Effect.addFinalizer(() => untaken((id) => finishRepos(worker, id)))
    const checkouts = yield* provisionRepos(worker, runId, mounts, hostUser())
    const identity = yield* mintIdentity(worker, runId, null, undefined, true)
    // Briefed as a cold run of the worker would be now: its gated repos' state included.
    const system = yield* systemPromptFor(worker, run.identity, mounts, run.channel)
    const plan = yield* provisionBox({
      worker, runId, runDir, taskId: null, kind: "warm", ceilingMin: shape.kind === "one-shot" ? org.box.ceiling_min : null,
      ceiling: Duration.sum(Duration.minutes(org.box.warm_idle_min), run.ceiling),
      token: identity.token, mode: "rpc", org, settings, mounts, channel: run.channel,
      chatSend: shape.chatSend ?? undefined, termSend: shape.termSend,
      piArgs: ["--session-id", routeKey(worker, system), "--append-system-prompt", system]
    }, store, checkouts)
    const backend = yield* BoxBackend
    const imageId = yield* backend.imageId(plan.image)
    const box = yield* backend.open(plan)
    const lines = yield* Ref.make<(line: string) => Effect.Effect<void>>(() => Effect.void)
    const failed = yield* Deferred.make<string>()
    // A failed check the box prints stops it: no run will take a box whose way out is not the gateway's.
    const preflight = (line: string) =>
      Option.match(failedPreflightLine(line), {
        onNone: () => Effect.void,
        onSome: ({ check, detail }) =>
          Deferred.succeed(failed, `its preflight failed (${check}: ${detail})`).pipe(Effect.zipRight(box.kill.pipe(
            // Never taken either way (its failure is set first); the pool's recycling removes it.
            Effect.catchAll((e) => Effect.logWarning(`warm box ${runId}: its preflight failed and its kill was refused by the engine (${e.message}); it is recycled`))
          )))
      })
    const onLine = (line: string) =>
      line.startsWith(`{"type":"roster_preflight"`) ? preflight(line) : Effect.flatMap(Ref.get(lines), (f) => f(line))
    const files = runFiles(runDir)
    const caps = outputCaps(org.box)
    const out = yield* Effect.forkScoped(drainTo(box.stdout, files.transcript, { onLine, ...caps }))
    const err = yield* Effect.forkScoped(drainTo(box.stderr, files.stderr, caps))
    yield* box.start
    const exit = yield* Effect.forkScoped(box.exited.pipe(Effect.either))
    const checked = yield* Deferred.make<void, WarmBoxUnready>()
    yield* Effect.forkScoped(preflightPassed(worker, runDir, failed, exit).pipe(Effect.exit, Effect.flatMap((done) => Deferred.done(checked, done))))
    const spent = Effect.gen(function*() {
      const why = yield* Deferred.poll(failed)
      if (Option.isSome(why)) return Option.some(yield* why.value)
      const check = yield* Deferred.poll(checked)
      const unready = Option.isSome(check) ? yield* Effect.flip(check.value).pipe(Effect.option) : Option.none<WarmBoxUnready>()
      if (Option.isSome(unready)) return Option.some(unready.value.why)
      const exited = yield* Fiber.poll(exit)
      if (Option.isSome(exited)) return Option.some("its box exited before a run took it")
      // Nothing else may have taken its token or its folder (for a stray's): a box without them cannot serve.
      // Not known to be intact is not taken: the run starts its own box, and this one is recycled.
      const intact = yield* Effect.all([fs.exists(identity.file), fs.exists(plan.dirs.pihome)]).pipe(Effect.orElseSucceed(() => [false, false]))
      return intact.every(Boolean) ? Option.none<string>() : Option.some("its token or its folder is gone")
    })
    return {
      runId, worker, shape, madeFrom: warmDigest(run, shape, system), imageId, preparedAt: yield* Clock.currentTimeMillis, identity, plan, settings,
      box: { id: box.id, exited: box.exited, write: box.write, closeStdin: box.closeStdin, kill: box.kill },
      // Awaited, never joined: a join would merge the drains' fiber refs (the console and logger of whatever made
      // the box) into the run that claims it, and its closing lines would go to another run's reader.
      lines, stdoutEnded: Fiber.await(out).pipe(Effect.asVoid), drained: Fiber.await(out).pipe(Effect.zipRight(Fiber.await(err)), Effect.asVoid), claimed, goesBy, spent,
      preflightIn: Deferred.await(checked)
    }
  })

/** Two shapes are one (a warm box of one serves a run of the other). */
export const sameShape = (a: WarmShape, b: WarmShape) =>
  a.kind === b.kind && a.chatSend === b.chatSend && a.termSend === b.termSend && a.channel === b.channel

/** A warm box taken for a run, with that run as it was prepared for the check: the run is made from exactly what was checked. */
export interface TakenWarm extends WarmBox {
  readonly run: PreparedRun
  /** The run id the box was made under, before it was handed to the run (its `runId` now). */
  readonly madeAs: string
  /**
   * Once the engine has the box under the run's name: the gateway finds a run's box by its name, so
   * the claim awaits it before the first prompt (the engine takes 10–20 ms, done meanwhile).
   */
  readonly renamed: Effect.Effect<void, DockerError>
}

/**
 * The run `warm` would serve, of this shape and these limits of its worker, prepared now under its own
 * run id (`runId`, or a new one; the box is renamed to it when it is handed over) — when the box can still serve and the run
 * is made from exactly what the box was (its shape, org.toml, worker.toml, identity, grants, the image);
 * none otherwise.
 */
export const warmFits = Effect.fn("warm.fits")(function*(warm: WarmBox, shape: WarmShape, limits: RunLimits, runId?: string) {
  if (!sameShape(warm.shape, shape) || Option.isSome(yield* warm.spent)) return Option.none<PreparedRun>()
  const backend = yield* BoxBackend
  // At once: the image's id is a question to the engine, the run's prologue mostly file reads, the lockdown
  // the engine's network and the host's rules — checked again at the claim, as a cold run checks it at its box's start.
  const [image, run, lockdown] = yield* Effect.all([
    backend.imageId(warm.plan.image).pipe(Effect.orElseSucceed(() => undefined)),
    prepareRun({ worker: warm.worker, kind: shape.kind, channel: shape.channel, limits, ...(runId !== undefined ? { runId } : {}) }),
    backend.isolation(warm.plan.policy).pipe(Effect.either)
  ], { concurrency: "unbounded" })
  const unlocked = lockdownLost(warm, lockdown)
  if (unlocked !== undefined) {
    yield* Effect.logWarning(`warm box ${warm.runId} of ${warm.worker}: ${unlocked}; it is recycled, and the run starts a box of its own`)
    return Option.none<PreparedRun>()
  }
  // What the run would be briefed with now: a push landed, an untaint or a new quarantine since the box was made is another box.
  const system = yield* systemPromptFor(run.worker, run.identity, run.mounts, run.channel)
  return image !== undefined && image === warm.imageId && warmDigest(run, shape, system) === warm.madeFrom
    ? Option.some({ ...run, system })
    : Option.none<PreparedRun>()
})

/** Why a warm box's lockdown no longer holds at its claim (the check failed, or the network it is on is not the one there is), or undefined. */
const lockdownLost = (warm: WarmBox, now: Either.Either<Isolation, { readonly message: string }>) => {
  if (Either.isLeft(now)) return `its lockdown no longer holds (${now.left.message})`
  const { plan } = warm
  if (now.right.network !== plan.network || (plan.networkId !== undefined && now.right.networkId !== plan.networkId)) {
    return `the locked network it is on (${plan.network}) is not the deployment's any more (made again since)`
  }
  if (now.right.gatewayAddress !== plan.gatewayAddress || now.right.gatewayPort !== plan.gatewayPort) {
    return `its gateway moved (${plan.gatewayAddress}:${plan.gatewayPort}, now ${now.right.gatewayAddress}:${now.right.gatewayPort})`
  }
  return undefined
}

/**
 * What a warm box no run took leaves when its daemon was killed: its folder (unless it holds a run's
 * record: then it was taken, and its folder is a record, kept) and its gated repos' clones, in which
 * nothing was done. True when there was such a folder to remove.
 */
export const removeUntakenWarm = Effect.fn("warm.removeUntaken")(function*(worker: string, runId: string) {
  const fs = yield* FileSystem.FileSystem
  const dir = layout(yield* Paths).runDir(worker, runId)
  if (yield* fs.exists(runFiles(dir).record)) return false
  // None when the box was being handed over (its folder is under the run's id by now); its clones may still be here.
  const had = yield* fs.exists(dir)
  if (had) yield* fs.remove(dir, { recursive: true })
  yield* finishRepos(worker, runId)
  return had
})
