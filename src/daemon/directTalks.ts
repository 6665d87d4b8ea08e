import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Cause, Deferred, Effect, Exit, Fiber, Mailbox, type ParseResult, Queue, Ref, Stream } from "effect"
import type { RosterPaths } from "../config/Paths.js"
import { TalkAsk, TalkInput, type TalkLine } from "../contract/talkWire.js"
import { lookAgainNow } from "../fs/stamp.js"
import { errorMessage } from "../report/plainLog.js"
import { visible } from "../report/terminal.js"
import { Runner } from "../runner/Runner.js"
import type { SessionMessage } from "../session/turnContext.js"
import { Supervisor } from "../supervisor/Supervisor.js"
import { inCliVoice } from "./cliVoice.js"
import { ownBuild } from "../contract/build.js"
import { declined } from "./directRuns.js"

/**
 * `roster talk` handed to the running daemon: the session runs here, so it takes its worker's
 * warm box when one is ready (a CLI of its own has none), and holds the worker's one box on this
 * node as a person's run does. The CLI keeps the terminal: each line typed comes as an input, and
 * the session's callbacks go back as lines of the answer, in order. The CLI's connection holds
 * the session: when it closes (the CLI killed, even with -9) the session ends and its box with it.
 */
interface HeldTalk {
  readonly inbox: Mailbox.Mailbox<SessionMessage>
  readonly controls: Queue.Queue<"abort">
  readonly quit: Deferred.Deferred<void>
  /** Where its messages come from: the terminal or the web. */
  readonly provider: "terminal" | "web"
  readonly fiber: Fiber.RuntimeFiber<unknown, unknown>
}
export type Talks = Ref.Ref<ReadonlyMap<string, HeldTalk>>

/** The session of one handed-over talk, saying everything through `say`; its last line says how it ended. */
const talkFor = (ask: typeof TalkAsk.Type, say: (l: TalkLine) => void, talks: Talks, runner: Runner["Type"], supervisor: Supervisor["Type"]) =>
  Effect.gen(function*() {
    // The files of the moment the person typed the command (an org.toml edit just before it counts).
    yield* lookAgainNow
    const inbox = yield* Mailbox.make<SessionMessage>()
    const controls = yield* Queue.unbounded<"abort">()
    const quit = yield* Deferred.make<void>()
    const tell = (l: TalkLine) => Effect.sync(() => say(l))
    const err = (text: string) => say({ kind: "err", text })
    const session = supervisor.holdWorker(ask.worker, `talk:${ask.token}`, (text) => Effect.sync(() => err(`${text}\n`))).pipe(
      Effect.zipRight(runner.session({
        worker: ask.worker,
        inbox,
        controls,
        surface: ask.surface ?? "term-session",
        channel: ask.channel,
        onReady: (runId) => tell({ kind: "ready", run_id: runId }),
        onReply: (text) => tell({ kind: "reply", text }),
        onMessage: (text) => tell({ kind: "message", text }),
        onSend: (text) => tell({ kind: "send", text }),
        // pi's every event only when the person asked for them (`--json`).
        ...(ask.json ? { onEvent: (text: string) => tell({ kind: "event", text }) } : {}),
        onTurnEnd: (turn) => tell({ kind: "turn_end", turn }),
        onNote: (text) => tell({ kind: "note", text })
      })),
      Effect.scoped,
      inCliVoice((text) => say({ kind: "out", text }), err)
    )
    // Started once the talk takes inputs; a second Ctrl-C ends it now (the box goes before the answer ends).
    const open = yield* Deferred.make<void>()
    const fiber = yield* Effect.forkScoped(Effect.zipRight(
      Deferred.await(open),
      Effect.raceFirst(Effect.map(session, (o) => ({ _tag: "ended" as const, o })), Effect.as(Deferred.await(quit), { _tag: "quit" as const }))
    ))
    yield* Effect.acquireRelease(
      Ref.update(talks, (m) => new Map(m).set(ask.token, { inbox, controls, quit, fiber, provider: ask.surface === "web-session" ? "web" : "terminal" })),
      () => Ref.update(talks, (m) => new Map([...m].filter(([token]) => token !== ask.token)))
    )
    // The head, once its inputs have somewhere to go: the CLI sends none before it.
    say({ kind: "head" })
    yield* Deferred.succeed(open, undefined)
    const exit = yield* Fiber.await(fiber)
    if (Exit.isSuccess(exit)) {
      const end = exit.value
      return end._tag === "quit"
        ? say({ kind: "failed", code: 130 })
        : say({ kind: "ended", run_id: end.o.runId, turns: end.o.turns, reason: end.o.reason, clean: end.o.clean })
    }
    const failure = Cause.failureOption(exit.cause)
    if (failure._tag === "Some") {
      // What the CLI's edge (src/bin.ts) says of a failure.
      err(`roster: ${visible(errorMessage(failure.value))}\n`)
      return say({ kind: "failed", code: 1 })
    }
    if (Cause.isInterruptedOnly(exit.cause)) {
      err("roster: the daemon stopped while it ran this session (its box was killed): talk again once it is back (roster server start)\n")
      return say({ kind: "failed", code: 1 })
    }
    err(`roster: unexpected failure\n${Cause.pretty(exit.cause)}\n`)
    return say({ kind: "failed", code: 70 })
  })

const badRequest = {
  RequestError: () => Effect.succeed(HttpServerResponse.text("unreadable request", { status: 400 })),
  ParseError: (e: ParseResult.ParseError) => Effect.succeed(HttpServerResponse.text(`bad request: ${e.message}`, { status: 400 }))
}

/** `POST /talks/direct`: the session, its lines streamed as they come (one JSON object a line), how it ended last. */
const startTalk = (build: string | undefined, paths: RosterPaths, talks: Talks, runner: Runner["Type"], supervisor: Supervisor["Type"]) =>
  Effect.gen(function*() {
    const ask = yield* HttpServerRequest.schemaBodyJson(TalkAsk)
    const why = declined(ask, build, paths)
    if (why) return HttpServerResponse.text(why, { status: 409 })
    yield* Effect.logInfo(`control: a talk with ${ask.worker} for the CLI that handed it over`)
    // The session's fibers live in the answer stream's scope, closed when the CLI's connection is.
    const body = Stream.unwrapScoped(Effect.gen(function*() {
      const out = yield* Mailbox.make<TalkLine>()
      yield* talkFor(ask, (l) => void out.unsafeOffer(l), talks, runner, supervisor).pipe(
        Effect.zipRight(out.end),
        Effect.forkScoped
      )
      return Mailbox.toStream(out)
    })).pipe(Stream.map((l) => new TextEncoder().encode(`${JSON.stringify(l)}\n`)))
    return HttpServerResponse.stream(body, { contentType: "application/x-ndjson" })
  }).pipe(Effect.catchTags(badRequest))

/** `POST /talks/direct/input`: a line typed, Ctrl-C during a turn, Ctrl-D, or a second Ctrl-C. */
const inputTalk = (talks: Talks) =>
  Effect.gen(function*() {
    const input = yield* HttpServerRequest.schemaBodyJson(TalkInput)
    const held = (yield* Ref.get(talks)).get(input.token)
    if (!held) return HttpServerResponse.text("no such talk", { status: 404 })
    switch (input.kind) {
      case "say":
        yield* held.inbox.offer({ text: input.text ?? "", author: input.author ?? "you", provider: held.provider, messageId: input.id ?? "" })
        break
      case "abort":
        yield* Queue.offer(held.controls, "abort")
        break
      case "end":
        yield* held.inbox.end
        break
      case "quit":
        yield* Deferred.succeed(held.quit, undefined)
        break
    }
    return HttpServerResponse.empty({ status: 204 })
  }).pipe(Effect.catchTags(badRequest))

/** The talks the daemon holds for CLIs, so that its stopping ends them before its server waits on their answers. */
export const makeDirectTalks = Ref.make<ReadonlyMap<string, HeldTalk>>(new Map())

/** Ends every talk held for a CLI (each says so to its CLI), before the control server closes. */
export const endDirectTalks = (talks: Talks) => Effect.flatMap(Ref.get(talks), (held) => Fiber.interruptAll([...held.values()].map((h) => h.fiber)))

/** The two routes beside the control API. */
export const directTalkRoutes = (paths: RosterPaths, talks: Talks) =>
  HttpApiBuilder.Router.use((router) =>
    Effect.gen(function*() {
      yield* router.post("/talks/direct", startTalk(yield* ownBuild, paths, talks, yield* Runner, yield* Supervisor))
      yield* router.post("/talks/direct/input", inputTalk(talks))
    })
  )
