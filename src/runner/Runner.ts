import { Context, Effect, Exit, Layer, Option, Ref, Scope } from "effect"
import type { WarmBox } from "../box/warmBox.js"
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
  /**
   * The worker's warm box for a one-shot with these limits, when this node has one that fits (a queued
   * task's claim takes it before its run id is written). Its taker passes it to `once`, which closes it.
   */
  readonly takeWarm: (worker: string, limits: WarmLimits) => Effect.Effect<Option.Option<WarmBox>>
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
      const refill = (worker: string) => (pool ? pool.refill(worker) : Effect.void)
      /** The worker's warm box for a one-shot with these limits, closed after `run` whatever happens (a claim made it the run's). */
      const withWarm = <A, E, R>(worker: string, limits: WarmLimits, run: (warm: WarmBox | undefined) => Effect.Effect<A, E, R>) =>
        Effect.gen(function*() {
          const warm = pool ? Option.getOrUndefined(yield* pool.take(worker, limits)) : undefined
          return yield* run(warm).pipe(Effect.ensuring(warm ? Scope.close(warm.scope, Exit.void) : Effect.void))
        })
      return Runner.of({
        once: (req) =>
          Effect.provide(runOnce(req), env).pipe(
            Effect.ensuring(req.warm ? Scope.close(req.warm.scope, Exit.void) : Effect.void),
            Effect.ensuring(refill(req.worker))
          ),
        takeWarm: (worker, limits) => (pool ? pool.take(worker, limits) : Effect.succeedNone),
        session: (req) => Effect.provide(runSession(req), env),
        direct: (req, view) =>
          Effect.gen(function*() {
            const say = (text: string) => report(notice(text))
            yield* holdBoxRow(req.worker, `direct:${crypto.randomBytes(6).toString("hex")}`, say).pipe(Effect.provide(fleet))
            // A run with its own channel is not the run a warm box was made for.
            if (req.channel !== null) return yield* directRun(req, view)
            return yield* withWarm(req.worker, { ceilingMin: req.ceilingMin }, (warm) => directRun(req, view, warm))
          }).pipe(
            Effect.scoped,
            (run) => (view.reporter ? Effect.provideService(run, Reporter, view.reporter) : run),
            Effect.provide(env),
            Effect.ensuring(refill(req.worker))
          )
      })
    })
  )

  /** No box: each run as `script` says, every call kept in {@link RunnerCalls} (see {@link runnerTest}). */
  static readonly layerTest = (script: RunnerScript = {}) => runnerTest(script)
}


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
 * {@link RunnerCalls} — for the supervisor's, chat's and the web's unit tests, which test what
 * they do with a run, not the run.
 */
const runnerTest = (script: RunnerScript = {}): Layer.Layer<Runner | RunnerCalls> =>
  Layer.effectContext(Effect.gen(function*() {
    const calls = yield* Ref.make<ReadonlyArray<RunnerCall>>([])
    const called = (c: RunnerCall) => Ref.modify(calls, (all) => [all.length + 1, [...all, c]] as const)
    const runner = Runner.of({
      once: (req) => Effect.flatMap(called({ _tag: "once", req }), (n) => script.once ? script.once(req, n) : Effect.succeed(exitedOk(req, n))),
      session: (req) => Effect.flatMap(called({ _tag: "session", req }), (n) => script.session ? script.session(req, n) : echoSession(req, n)),
      direct: (req, view) => Effect.flatMap(called({ _tag: "direct", req }), () => script.direct ? script.direct(req, view) : Effect.succeed(0)),
      takeWarm: () => Effect.succeedNone
    })
    return Context.make(Runner, runner).pipe(Context.add(RunnerCalls, calls))
  }))
