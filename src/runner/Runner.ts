import { Context, Effect, Exit, Layer, Option, Ref, Scope } from "effect"
import type { TakenWarm, WarmShape } from "../box/warmBox.js"
import { type WarmLimits, WarmPool } from "./WarmPool.js"
import { type DirectRun, directRun, type DirectRunView } from "../box/directRun.js"
import { type RunOutcome, type RunRequest, runOnce } from "../box/runOnce.js"
import * as crypto from "node:crypto"
import { FleetMember } from "../fleet/FleetMember.js"
import { holdBoxRow } from "../fleet/holdBoxRow.js"
import { notice, report, Reporter } from "../report/Reporter.js"
import { runSession } from "../session/runSession.js"
import type { SessionOutcome, SessionRequest } from "../session/sessionRequest.js"

/** What a run needs of roster: the engine, the files, the stores, the gateway's state — held by the Runner's layer. */
export type RunEnv = Effect.Effect.Context<ReturnType<typeof runOnce>> | Effect.Effect.Context<ReturnType<typeof runSession>> | Reporter

/** Why a one-shot run could not run (its box's own end is its outcome, not an error). */
export type RunError = Effect.Effect.Error<ReturnType<typeof runOnce>>

/** Why a warm session could not run. */
export type SessionError = Effect.Effect.Error<ReturnType<typeof runSession>>

/** `roster worker run`'s view, and where its progress goes (the CLI's terminal, or the CLI a daemon runs it for). */
export interface DirectView extends DirectRunView {
  readonly reporter?: Context.Tag.Service<Reporter>
}

/**
 * The one way every surface starts a run — the supervisor's tasks, the daemon's handed-over
 * runs, chat, the web's Talk, the CLI. Every method needs nothing of its caller: the layer holds
 * the run's services, taken once where it is built, so a surface takes this one tag and a test
 * gives it {@link Runner.layerTest} instead of an engine.
 */
export class Runner extends Context.Tag("roster/Runner")<Runner, {
  /** A one-shot run (a task's, an embedder's): the box's exit raced against its ceiling. */
  readonly once: (req: RunRequest) => Effect.Effect<RunOutcome, RunError>
  /** A warm session serving an inbox of messages (talk, the web's Talk, a chat channel). */
  readonly session: (req: SessionRequest) => Effect.Effect<SessionOutcome, SessionError>
  /** A person's one-shot run as `roster worker run` shows it, line by line; the exit code the CLI exits with. */
  readonly direct: (req: DirectRun, view: DirectView) => Effect.Effect<number, RunError>
}>() {
  /** Over the services of the context it is built in (the CLI's RosterLive, or the daemon's own fleet stores). */
  static readonly layer: Layer.Layer<Runner, never, RunEnv> = Layer.effect(
    Runner,
    Effect.gen(function*() {
      // Without the builder's Scope: a run's finalizers (its box, its token, its record) are the run's own.
      const env = Context.omit(Scope.Scope)(yield* Effect.context<RunEnv>()) as Context.Context<RunEnv>
      // A fleet node's: a person's run holds its worker's box row, as a task's claim and a chat session do.
      const member = yield* Effect.serviceOption(FleetMember)
      const fleet = Option.match(member, { onNone: () => Context.empty(), onSome: (m) => Context.make(FleetMember, m) })
      // The daemon's warm boxes (none where the layer is not given: a CLI's own runs start their own box).
      const pool = Option.getOrUndefined(yield* Effect.serviceOption(WarmPool))
      // After a run of a worker, its next box is made of that run's shape.
      const refill = (worker: string, shape: WarmShape) => (pool ? pool.refill(worker, shape) : Effect.void)
      const take = (worker: string, shape: WarmShape, limits: WarmLimits, runId?: string) => (pool ? pool.take(worker, shape, limits, runId) : Effect.succeedNone)
      /**
       * The worker's warm box for a run of this shape and limits (handed over under `runId`, when the caller
       * recorded one already), closed after `run` whatever happens (a claim made it the run's).
       */
      const withWarm = <A, E, R>(worker: string, shape: WarmShape, limits: WarmLimits, run: (warm: TakenWarm | undefined) => Effect.Effect<A, E, R>, runId?: string) =>
        // The box's close is armed before the run can be interrupted: a run stopped at its start leaves no box behind.
        Effect.uninterruptibleMask((restore) =>
          Effect.flatMap(take(worker, shape, limits, runId), (taken) => {
            const warm = Option.getOrUndefined(taken)
            return restore(run(warm)).pipe(Effect.ensuring(warm ? Scope.close(warm.scope, Exit.void) : Effect.void))
          })
        )
      return Runner.of({
        // A fresh run takes its worker's warm box (a continuation's box gets the session it resumes, so it starts its own).
        once: (req) => {
          const shape = oneShot(req.channel ?? null)
          const run = req.continues ? runOnce(req) : withWarm(req.worker, shape, { ceilingMin: req.ceilingMin }, (warm) => runOnce(req, warm), req.runId)
          return Effect.provide(run, env).pipe(Effect.ensuring(refill(req.worker, shape)))
        },
        session: (req) => {
          const shape = sessionShape(req)
          return withWarm(req.worker, shape, { idleSecs: req.limits?.idleSecs, sessionCeilingMin: req.limits?.ceilingMin }, (warm) =>
            runSession(req, warm)).pipe(Effect.provide(env), Effect.ensuring(refill(req.worker, shape)))
        },
        direct: (req, view) =>
          Effect.gen(function*() {
            const say = (text: string) => report(notice(text))
            yield* holdBoxRow(req.worker, `direct:${crypto.randomBytes(6).toString("hex")}`, say).pipe(Effect.provide(fleet))
            return yield* withWarm(req.worker, oneShot(req.channel), { ceilingMin: req.ceilingMin }, (warm) => directRun(req, view, warm))
          }).pipe(
            Effect.scoped,
            (run) => (view.reporter ? Effect.provideService(run, Reporter, view.reporter) : run),
            Effect.provide(env),
            Effect.ensuring(refill(req.worker, oneShot(req.channel)))
          )
      })
    })
  )

  /** No box: each run as `script` says, every call kept in {@link RunnerCalls} (see {@link runnerTest}). */
  static readonly layerTest = (script: RunnerScript = {}) => runnerTest(script)
}


const oneShot = (channel: string | null): WarmShape => ({ kind: "one-shot", chatSend: null, termSend: false, channel })

/** A session's shape: its send tool (a chat session's service, a talk's term_send) and its channel. */
const sessionShape = (req: SessionRequest): WarmShape => ({
  kind: "session",
  chatSend: req.surface === "chat-session" ? req.chat?.provider ?? null : null,
  termSend: req.surface === "term-session" || req.surface === "web-session",
  channel: req.channel ?? null
})

/** A run the test layer was asked for, in the order asked. */
export type RunnerCall =
  | { readonly _tag: "once"; readonly req: RunRequest }
  | { readonly _tag: "session"; readonly req: SessionRequest }
  | { readonly _tag: "direct"; readonly req: DirectRun }

/** What each kind of run does in a test; one left out does the default (see {@link Runner.layerTest}). */
export interface RunnerScript {
  readonly once?: (req: RunRequest, n: number) => Effect.Effect<RunOutcome, RunError>
  readonly session?: (req: SessionRequest, n: number) => Effect.Effect<SessionOutcome, SessionError>
  readonly direct?: (req: DirectRun, view: DirectView) => Effect.Effect<number, RunError>
}

/** The runs {@link runnerTest} was asked for, in order. */
export class RunnerCalls extends Context.Tag("roster/RunnerCalls")<RunnerCalls, Ref.Ref<ReadonlyArray<RunnerCall>>>() {}

/** A warm box {@link runnerTest} was asked for (it has none to give): the worker, the channel and the run's limits. */
export interface WarmAsk {
  readonly worker: string
  readonly channel: string | null
  readonly limits: WarmLimits
}

/** The warm boxes {@link runnerTest} was asked for, in order (which runs would have taken one). */
export class WarmAsks extends Context.Tag("roster/WarmAsks")<WarmAsks, Ref.Ref<ReadonlyArray<WarmAsk>>>() {}

const runIdOf = (n: number) => `2026-01-01-00-00-00-${n.toString(16).padStart(8, "0")}`

/** A one-shot run whose box exited 0 with `finalText` as its answer. */
export const exitedOk = (req: RunRequest, n: number, finalText: string | null = null): RunOutcome => ({
  runId: req.runId ?? runIdOf(n),
  runDir: `/nonexistent/runs/${req.worker}/${req.runId ?? runIdOf(n)}`,
  endedBy: "exit",
  exitCode: 0,
  error: null,
  finalText,
  messages: [],
  ceilingMin: req.ceilingMin ?? 30
})

/**
 * The default session: ready at once, each message of its inbox a turn answered "(scripted) <text>",
 * ended "closed" when the inbox is done.
 */
export const echoSession = (req: SessionRequest, n: number): Effect.Effect<SessionOutcome> =>
  Effect.gen(function*() {
    const runId = runIdOf(n)
    if (req.onReady) yield* req.onReady(runId)
    let turns = 0
    for (;;) {
      const next = yield* req.inbox.take.pipe(Effect.option)
      if (next._tag === "None") break
      turns++
      if (req.onTurnStart) yield* req.onTurnStart(next.value)
      if (req.onReply) yield* req.onReply(`(scripted) ${next.value.text}`)
      if (req.onTurnEnd) yield* req.onTurnEnd(turns, { delivered: true, failed: false, message: next.value })
    }
    return { runId, runDir: `/nonexistent/runs/${req.worker}/${runId}`, reason: "closed", clean: true, turns, unserved: [], ceilingMin: req.limits?.ceilingMin ?? 240 } satisfies SessionOutcome
  })

/**
 * A Runner that starts no box: each run does what `script` says (by default a one-shot run exits
 * 0, a session echoes its inbox, a direct run exits 0), and every call is kept in
 * {@link RunnerCalls}, every ask for a warm box (it has none) in {@link WarmAsks} — for the
 * supervisor's, chat's and the web's unit tests, which test what they do with a run, not the run.
 */
const runnerTest = (script: RunnerScript = {}): Layer.Layer<Runner | RunnerCalls | WarmAsks> =>
  Layer.effectContext(Effect.gen(function*() {
    const calls = yield* Ref.make<ReadonlyArray<RunnerCall>>([])
    const asks = yield* Ref.make<ReadonlyArray<WarmAsk>>([])
    const called = (c: RunnerCall) => Ref.modify(calls, (all) => [all.length + 1, [...all, c]] as const)
    const runner = Runner.of({
      // A fresh one-shot asks for its worker's warm box (this layer has none to give), as the live Runner's does.
      once: (req) =>
        (req.continues ? Effect.void : Ref.update(asks, (all) => [...all, { worker: req.worker, channel: req.channel ?? null, limits: { ceilingMin: req.ceilingMin } }])).pipe(
          Effect.zipRight(called({ _tag: "once", req })),
          Effect.flatMap((n) => script.once ? script.once(req, n) : Effect.succeed(exitedOk(req, n)))
        ),
      session: (req) => Effect.flatMap(called({ _tag: "session", req }), (n) => script.session ? script.session(req, n) : echoSession(req, n)),
      direct: (req, view) => Effect.flatMap(called({ _tag: "direct", req }), () => script.direct ? script.direct(req, view) : Effect.succeed(0))
    })
    return Context.make(Runner, runner).pipe(Context.add(RunnerCalls, calls), Context.add(WarmAsks, asks))
  }))
