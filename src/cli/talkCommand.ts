import { printRunWarnings } from "../run/runWarnings.js"
import { Args, Command, Options } from "@effect/cli"
import { Console, Deferred, Effect, Exit, Mailbox, Option, Queue } from "effect"
import * as readline from "node:readline"
import { ExitCode } from "./exit.js"
import { visible } from "./terminal.js"
import { Runner } from "../runner/Runner.js"
import type { SessionMessage } from "../session/turnContext.js"
import { type TalkCallbacks, type TalkEnd, talkLineTo, talkViaDaemon } from "../api/talkClient.js"

const say = (text: string) => Effect.sync(() => void process.stdout.write(`${text}\n`))

/**
 * `roster talk <worker>`: a conversation with a worker in a warm box. Each line you type is a
 * turn; Ctrl-D ends the session cleanly; Ctrl-C during a turn aborts that turn, a second
 * Ctrl-C ends the session. `--json` prints pi's raw events instead, for scripts.
 */
export const talkCommand = Command.make("talk", {
  worker: Args.text({ name: "worker" }).pipe(Args.withDescription("the worker to talk to")),
  json: Options.boolean("json").pipe(Options.withDescription("print pi's raw rpc events (one JSON per line) instead of the conversation")),
  channel: Options.text("channel").pipe(
    Options.optional,
    Options.withDescription("talk in a channel: each turn and reply is added to its history, a new session starts from its recent messages; its recent messages read-only at /pihome/channel, and a store the worker keeps per channel at /pihome/channel/store")
  )
}, ({ channel, json, worker }) =>
  Effect.gen(function*() {
    const inbox = yield* Mailbox.make<SessionMessage>()
    const controls = yield* Queue.unbounded<"abort">()
    const quit = yield* Deferred.make<void>()
    const interactive = process.stdin.isTTY === true && !json
    let busy = false
    let aborting = false
    let counter = 0
    const rl = yield* Effect.acquireRelease(
      Effect.sync(() => readline.createInterface({ input: process.stdin, output: process.stdout, prompt: "you> ", terminal: interactive })),
      (r) => Effect.sync(() => r.close())
    )
    rl.pause()
    const showPrompt = () => {
      if (interactive) rl.prompt()
    }
    rl.on("line", (text) => {
      if (text.trim() === "") return showPrompt()
      busy = true
      aborting = false
      inbox.unsafeOffer({ text, author: process.env.USER ?? "you", provider: "terminal", messageId: String(++counter) })
    })
    rl.on("close", () => inbox.unsafeDone(Exit.void))
    rl.on("SIGINT", () => {
      if (busy && !aborting) {
        aborting = true
        controls.unsafeOffer("abort")
        process.stdout.write("\n(aborting this turn — Ctrl-C again ends the session)\n")
      } else {
        Deferred.unsafeDone(quit, Exit.void)
      }
    })

    const shown = {
      onReady: () =>
        Effect.gen(function*() {
          if (interactive) yield* Console.log(`talking to ${worker} in a box — Ctrl-D ends, Ctrl-C aborts a turn`)
          rl.resume()
          showPrompt()
        }),
      onReply: (text: string) => (json ? Effect.void : say(`${interactive ? "\r\x1b[K" : ""}${worker}> ${visible(text)}`)),
      onMessage: (text: string) => (json ? Effect.void : say(`${interactive ? "\r\x1b[K" : ""}${worker} (message)> ${visible(text)}`)),
      // The worker's own word to the person, between turns (term_send).
      onSend: (text: string) => (json ? Effect.void : say(`${interactive ? "\r\x1b[K" : ""}${worker}: ${visible(text)}`)),
      // pi's events for scripts: JSON escapes C0 itself, but a raw control byte from the box must not reach a terminal either.
      onEvent: (line: string) => (json ? say(visible(line)) : Effect.void),
      onTurnEnd: () =>
        Effect.sync(() => {
          busy = false
          aborting = false
          showPrompt()
        }),
      onNote: (text: string) => say(`(${visible(text)})`)
    } satisfies TalkCallbacks
    // Through the running daemon when there is one (its worker's warm box is there), else in this process.
    const handed = yield* talkViaDaemon({ worker, channel: Option.getOrNull(channel), json }, {
      inbox,
      controls,
      on: talkLineTo(shown, (text) => Effect.sync(() => void process.stdout.write(text)), (text) => Effect.sync(() => void process.stderr.write(text)))
    })
    const ended: TalkEnd | { readonly _tag: "quit" } = Option.isSome(handed)
      ? yield* Effect.zipRight(
        // A second Ctrl-C: the daemon ends the session, and its answer ends with the box gone.
        Effect.forkScoped(Effect.zipRight(Deferred.await(quit), handed.value.quit)),
        Effect.map(handed.value.ended, (end) => (end._tag === "failed" && end.code === 130 ? { _tag: "quit" as const } : end))
      )
      : yield* Effect.raceFirst(
        (yield* Runner).session({ worker, inbox, controls, surface: "term-session", channel: Option.getOrNull(channel), ...shown }).pipe(
          Effect.map((o): TalkEnd => ({ _tag: "ended", runId: o.runId, turns: o.turns, reason: o.reason, clean: o.clean }))
        ),
        Deferred.await(quit).pipe(Effect.as({ _tag: "quit" as const }))
      )
    if (ended._tag === "quit") {
      if (interactive) yield* Console.log("\n(session ended)")
      return yield* Effect.fail(new ExitCode({ code: 130 }))
    }
    if (ended._tag === "failed") return yield* Effect.fail(new ExitCode({ code: ended.code }))
    yield* printRunWarnings(worker, ended.runId)
    if (interactive) yield* Console.log(`\n(session ${ended.runId}: ${ended.turns} turn${ended.turns === 1 ? "" : "s"}, ended: ${ended.reason})`)
    if (!ended.clean) return yield* Effect.fail(new ExitCode({ code: 1 }))
  }).pipe(Effect.scoped)).pipe(Command.withDescription(
    "Talk with a worker in a warm box: each line is a turn of one conversation. Ctrl-D ends the session; " +
      "Ctrl-C aborts the turn in flight, a second Ctrl-C ends the session. --json prints pi's raw events for scripts. " +
      "Example: roster talk alice"
  ))
