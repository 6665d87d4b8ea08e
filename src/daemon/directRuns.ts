import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Cause, Effect, Exit, Fiber, Mailbox, type ParseResult, Ref, Schema, Stream } from "effect"
import type { RosterPaths } from "../config/Paths.js"
import { ownBuild } from "../contract/build.js"
import { lookAgainNow } from "../fs/stamp.js"
import { Runner } from "../runner/Runner.js"
import { CeilingMinutes } from "../config/ceiling.js"
import { renderReport } from "../report/renderReport.js"
import { notice, type Reporter } from "../report/Reporter.js"
import { Supervisor } from "../supervisor/Supervisor.js"
import { visible } from "../report/terminal.js"
import { errorMessage } from "../report/plainLog.js"
import { inCliVoice } from "./cliVoice.js"

/**
 * `roster worker run` handed to the running daemon (bin/roster.js): the CLI starts in a tenth of
 * the time when it does not load the program, and the daemon has it loaded and warm. The daemon
 * runs the same {@link directRun} the CLI would and streams back every line it would have
 * printed, in order, then its exit code. The box's owner is the daemon, and the CLI's connection
 * holds the run: when it closes (the CLI killed, even with -9) the run is interrupted and its
 * scope kills the box, as the CLI's own scope would have.
 */
const Ask = Schema.Struct({
  /** The client's build: a daemon of another build says no, and the CLI runs it itself. */
  build: Schema.String,
  /** Names the run for a later interrupt (the CLI's Ctrl-C). */
  token: Schema.String.pipe(Schema.minLength(16)),
  worker: Schema.String,
  prompt: Schema.String,
  ceiling_min: Schema.optional(CeilingMinutes),
  channel: Schema.NullOr(Schema.String),
  /** The CLI's terminal: colour on its stdout; its stderr a terminal, how wide (progress lines). */
  stdout_colour: Schema.Boolean,
  stderr_tty: Schema.Boolean,
  columns: Schema.optional(Schema.Number),
  /** The CLI's environment where it decides what the run reaches: another engine or home, and the CLI runs it itself. */
  docker_host: Schema.NullOr(Schema.String),
  home: Schema.String,
  /** The config root the CLI would read: another deployment's, and the CLI runs it itself (and is told the gateway is not its own). */
  config: Schema.String
})
type Ask = typeof Ask.Type

const Interrupt = Schema.Struct({ token: Schema.String, signal: Schema.Literal("SIGINT", "SIGTERM") })

/** One line of the answer: text for the CLI's stdout (o) or stderr (e), or its exit code (x), last; the first is empty. */
type Said = { readonly o: string } | { readonly e: string } | { readonly x: number } | Record<string, never>


/** Why this daemon will not run it (or a talk) for the CLI (it then runs it itself), or undefined. */
export const declined = (ask: Pick<Ask, "build" | "docker_host" | "home" | "config">, build: string | undefined, paths: RosterPaths) =>
  build === undefined || ask.build !== build
    ? `this daemon runs build ${build ?? "none"}, the CLI ${ask.build}`
    : ask.docker_host !== (process.env.DOCKER_HOST ?? null)
    ? "the CLI's DOCKER_HOST is not the daemon's"
    : ask.home !== paths.home
    ? "the CLI's HOME is not the daemon's"
    : ask.config !== paths.config
    ? "the CLI's config root is not the daemon's"
    : undefined

/** The run in a fiber of the stream's scope, saying everything through `say`; its exit code last. */
const runFor = (ask: Ask, say: (s: Said) => void, runs: Runs, runner: Runner["Type"], supervisor: Supervisor["Type"]) =>
  Effect.gen(function*() {
    const signalled = yield* Ref.make<"SIGINT" | "SIGTERM" | undefined>(undefined)
    // The files of the moment the person typed the command: an org.toml edit (lockdown on) or a connection removed just before it counts.
    yield* lookAgainNow
    const reporter: Reporter["Type"] = {
      report: (r) => Effect.sync(() => renderReport(r, { isTTY: ask.stderr_tty, ...(ask.columns ? { columns: ask.columns } : {}), write: (e) => say({ e }) }))
    }
    // One box per worker on this node: a person's run waits while its worker has one (a task, a chat session, another run).
    const run = supervisor.holdWorker(ask.worker, `direct:${ask.token}`, (text) => reporter.report(notice(text))).pipe(Effect.zipRight(runner.direct({
      worker: ask.worker,
      prompt: ask.prompt,
      ...(ask.ceiling_min !== undefined ? { ceilingMin: ask.ceiling_min } : {}),
      channel: ask.channel
    }, {
      say: (o) => Effect.sync(() => o !== "" && say({ o })),
      colour: ask.stdout_colour,
      reporter
    })), Effect.scoped).pipe(
      // What the CLI's edge (src/bin.ts) says of a failure.
      Effect.catchAll((e) => Effect.sync(() => say({ e: `roster: ${visible(errorMessage(e))}\n` })).pipe(Effect.as(1))),
      inCliVoice((o) => say({ o }), (e) => say({ e }))
    )
    const fiber = yield* Effect.forkScoped(run)
    yield* Effect.acquireRelease(
      Ref.update(runs, (m) => new Map(m).set(ask.token, { fiber, signalled })),
      () => Ref.update(runs, (m) => new Map([...m].filter(([token]) => token !== ask.token)))
    )
    const exit = yield* Fiber.await(fiber)
    const signal = yield* Ref.get(signalled)
    if (Exit.isSuccess(exit)) return exit.value
    if (Cause.isInterruptedOnly(exit.cause)) {
      if (signal) return signal === "SIGTERM" ? 143 : 130
      say({ e: "roster: the daemon stopped while it ran this run (its box was killed): run it again once it is back (roster server start)\n" })
      return 1
    }
    say({ e: `roster: unexpected failure\n${Cause.pretty(exit.cause)}\n` })
    return 70
  })

/** A run held for a CLI, by its token: its fiber, and the signal that ended it when the CLI passed one on. */
interface Held {
  readonly fiber: Fiber.RuntimeFiber<unknown>
  readonly signalled: Ref.Ref<"SIGINT" | "SIGTERM" | undefined>
}
export type Runs = Ref.Ref<ReadonlyMap<string, Held>>

const badRequest = {
  RequestError: () => Effect.succeed(HttpServerResponse.text("unreadable request", { status: 400 })),
  ParseError: (e: ParseResult.ParseError) => Effect.succeed(HttpServerResponse.text(`bad request: ${e.message}`, { status: 400 }))
}

/** `POST /runs/direct`: the run, its lines streamed as they come (one JSON object a line), its exit code last. */
const startRun = (build: string | undefined, paths: RosterPaths, runs: Runs, runner: Runner["Type"], supervisor: Supervisor["Type"]) =>
  Effect.gen(function*() {
    const ask = yield* HttpServerRequest.schemaBodyJson(Ask)
    const why = declined(ask, build, paths)
    if (why) return HttpServerResponse.text(why, { status: 409 })
    yield* Effect.logInfo(`control: running a run of ${ask.worker} for the CLI that handed it over`)
    // The run's fibers live in the answer stream's scope, closed when the CLI's connection is.
    const body = Stream.unwrapScoped(Effect.gen(function*() {
      const out = yield* Mailbox.make<Said>()
      // A first, empty line: the answer's head goes out now, so the CLI knows the run is the daemon's (and its Ctrl-C has a run to reach).
      yield* out.offer({})
      yield* runFor(ask, (s) => void out.unsafeOffer(s), runs, runner, supervisor).pipe(
        Effect.flatMap((x) => Effect.zipRight(out.offer({ x }), out.end)),
        Effect.forkScoped
      )
      return Mailbox.toStream(out)
    })).pipe(Stream.map((s) => new TextEncoder().encode(`${JSON.stringify(s)}\n`)))
    return HttpServerResponse.stream(body, { contentType: "application/x-ndjson" })
  }).pipe(Effect.catchTags(badRequest))

/** `POST /runs/direct/interrupt`: the CLI's Ctrl-C or SIGTERM; the run ends as the CLI's own would, with its closing lines. */
const interruptRun = (runs: Runs) =>
  Effect.gen(function*() {
    const ask = yield* HttpServerRequest.schemaBodyJson(Interrupt)
    const held = (yield* Ref.get(runs)).get(ask.token)
    if (!held) return HttpServerResponse.text("no such run", { status: 404 })
    yield* Ref.set(held.signalled, ask.signal)
    yield* Fiber.interruptFork(held.fiber)
    return HttpServerResponse.empty({ status: 204 })
  }).pipe(Effect.catchTags(badRequest))

/** The runs the daemon holds for CLIs, so that its stopping ends them before its server waits on their answers. */
export const makeDirectRuns = Ref.make<ReadonlyMap<string, Held>>(new Map())

/** Ends every run held for a CLI (each says so to its CLI), before the control server closes. */
export const endDirectRuns = (runs: Runs) => Effect.flatMap(Ref.get(runs), (held) => Fiber.interruptAll([...held.values()].map((h) => h.fiber)))

/** The two routes beside the control API. */
export const directRunRoutes = (paths: RosterPaths, runs: Runs) =>
  HttpApiBuilder.Router.use((router) =>
    Effect.gen(function*() {
      // The daemon's Runner holds what a run needs (the engine, the files, the gateway's state).
      yield* router.post("/runs/direct", startRun(yield* ownBuild, paths, runs, yield* Runner, yield* Supervisor))
      yield* router.post("/runs/direct/interrupt", interruptRun(runs))
    })
  )
