import { FileSystem } from "@effect/platform"
import * as NodeStream from "@effect/platform-node/NodeStream"
import { Console, Deferred, Effect, Fiber, Mailbox, Option, Queue, Schema, Stream } from "effect"
import * as crypto from "node:crypto"
import * as http from "node:http"
import { layout, Paths } from "../config/Paths.js"
import { type TalkAsk, type TalkInput, TalkLine } from "../contract/talkWire.js"
import { ownBuild } from "../contract/build.js"
import { untilHurried } from "../run/Hurry.js"

/** One POST to the control socket: its response, body unread. The request is dropped when the effect is interrupted. */
const post = (socket: string, route: string, body: unknown) =>
  Effect.async<http.IncomingMessage, Error>((resume) => {
    const text = JSON.stringify(body)
    const req = http.request(
      { socketPath: socket, path: route, method: "POST", headers: { "content-type": "application/json", "content-length": Buffer.byteLength(text) } },
      (res) => resume(Effect.succeed(res))
    )
    req.on("error", (e) => resume(Effect.fail(e)))
    req.end(text)
    return Effect.sync(() => req.destroy())
  })

/** How a handed-over talk ended: as a session does, or with the exit code of one that could not run (130: the person quit). */
export type TalkEnd =
  | { readonly _tag: "ended"; readonly runId: string; readonly turns: number; readonly reason: string; readonly clean: boolean }
  | { readonly _tag: "failed"; readonly code: number }

/** One message the person sends (a session's inbox holds these, and more). */
interface Said {
  readonly text: string
  readonly author: string
  readonly messageId: string
}

/** What the person does (their messages, ending at Ctrl-D or the page's End; an abort of the turn in flight), and where the session's lines go. */
export interface TalkIo {
  readonly inbox: Mailbox.ReadonlyMailbox<Said>
  readonly controls: Queue.Dequeue<"abort">
  readonly on: (line: TalkLine) => Effect.Effect<void>
}

/** A session's callbacks, as a talk shows what its session says (the CLI's terminal, the web's Talk page). */
export interface TalkCallbacks {
  readonly onReady: (runId: string) => Effect.Effect<void>
  readonly onReply: (text: string) => Effect.Effect<void>
  readonly onMessage: (text: string) => Effect.Effect<void>
  readonly onSend: (text: string) => Effect.Effect<void>
  readonly onEvent: (line: string) => Effect.Effect<void>
  readonly onTurnEnd: (turn: number) => Effect.Effect<void>
  readonly onNote: (text: string) => Effect.Effect<void>
}

/** Each line of a session the daemon runs, to the callback that would have shown it; roster's own text to `out` and `err`. */
export const talkLineTo = (shown: TalkCallbacks, out: (text: string) => Effect.Effect<void>, err: (text: string) => Effect.Effect<void>) =>
(line: TalkLine): Effect.Effect<void> => {
  switch (line.kind) {
    case "ready":
      return shown.onReady(line.run_id)
    case "reply":
      return shown.onReply(line.text)
    case "message":
      return shown.onMessage(line.text)
    case "send":
      return shown.onSend(line.text)
    case "event":
      return shown.onEvent(line.text)
    case "note":
      return shown.onNote(line.text)
    case "turn_end":
      return shown.onTurnEnd(line.turn)
    case "out":
      return out(line.text)
    case "err":
      return err(line.text)
    default:
      return Effect.void
  }
}

const decodeLine = Schema.decodeUnknownOption(Schema.parseJson(TalkLine))

/**
 * A talk (`roster talk`, the web's Talk) through the running daemon (src/daemon/directTalks.ts), where its worker's warm
 * box is. None when there is none to hand it to — no daemon, a daemon of another build or
 * deployment, or an older one without the route — and the CLI runs the session itself; nothing
 * has started then. Else the session's end (every line it said given to `io.on` before), and
 * `quit`, which ends it now (its box gone before the end comes back); a wait for the end that is
 * interrupted quits and still waits for it. Needs the caller's scope: closing it drops the
 * connection, and the daemon ends the session.
 */
export const talkViaDaemon = (ask: Omit<TalkAsk, "token" | "build" | "docker_host" | "home" | "config">, io: TalkIo) =>
  Effect.gen(function*() {
    const build = yield* ownBuild
    if (build === undefined || process.env.ROSTER_HANDOFF === "0" || process.env.ROSTER_TRACE) return Option.none()
    const paths = yield* Paths
    const socket = layout(paths).controlSocket
    // A socket that cannot be looked at is no daemon to hand to: the CLI does the work itself, as with none running.
    if (!(yield* (yield* FileSystem.FileSystem).exists(socket).pipe(Effect.orElseSucceed(() => false)))) return Option.none()
    const token = crypto.randomBytes(12).toString("hex")
    const full: TalkAsk = { ...ask, token, build, docker_host: process.env.DOCKER_HOST ?? null, home: paths.home, config: paths.config }
    const answer = yield* Effect.acquireRelease(post(socket, "/talks/direct", full).pipe(Effect.option), (res) =>
      Effect.sync(() => Option.map(res, (r) => r.destroy())))
    if (Option.isNone(answer) || answer.value.statusCode !== 200) {
      Option.map(answer, (r) => r.resume())
      return Option.none()
    }
    const input = (kind: TalkInput["kind"], extra: Partial<TalkInput> = {}) =>
      post(socket, "/talks/direct/input", { token, kind, ...extra } satisfies TalkInput).pipe(
        Effect.map((r) => void r.resume()),
        // A daemon that went away meanwhile ends the answer too: that is where it is said.
        Effect.ignore
      )
    // The daemon takes inputs once its answer's head has come. In order: each line, then (Ctrl-D) the end of them.
    const head = yield* Deferred.make<void>()
    const afterHead = <A, E>(effect: Effect.Effect<A, E>) => Effect.forkScoped(Effect.zipRight(Deferred.await(head), effect))
    yield* afterHead(Mailbox.toStream(io.inbox).pipe(
      Stream.runForEach((m) => input("say", { text: m.text, author: m.author, id: m.messageId })),
      Effect.zipRight(input("end"))
    ))
    yield* afterHead(Effect.forever(Effect.flatMap(Queue.take(io.controls), () => input("abort"))))
    // Read as a Node stream, destroyed when its reader is interrupted: an async iterator's return() waits
    // for its pending next(), so a signal would hang until the daemon said another line.
    const lines = NodeStream.fromReadable<Error, Uint8Array>(() => answer.value, (e) => new Error(String(e))).pipe(
      Stream.decodeText(),
      Stream.splitLines,
      Stream.filterMap(decodeLine)
    )
    const ended = Stream.runFoldEffect(lines, undefined as TalkEnd | undefined, (end, line) =>
      line.kind === "ended"
        ? Effect.succeed<TalkEnd>({ _tag: "ended", runId: line.run_id, turns: line.turns, reason: line.reason, clean: line.clean })
        : line.kind === "failed"
        ? Effect.succeed<TalkEnd>({ _tag: "failed", code: line.code })
        : line.kind === "head"
        ? Effect.as(Deferred.succeed(head, undefined), end)
        : Effect.as(io.on(line), end)).pipe(
        Effect.catchAll(() => Effect.succeed(undefined)),
        // An answer cut before its last line: the daemon stopped or died under it.
        Effect.flatMap((end) =>
          end
            ? Effect.succeed(end)
            : Effect.as(
              Console.error("roster: the daemon went away while it ran this session: talk again once it is back (roster server start)"),
              { _tag: "failed", code: 1 } satisfies TalkEnd
            ))
      )
    const quit = Effect.zipRight(Deferred.await(head), input("quit"))
    // Read from now on whatever its reader does, so that a reader interrupted (a SIGTERM, a Ctrl-C off a terminal, the
    // web stopping) can ask the daemon to end the session and still hear its end, which comes once the box is gone — as
    // a session the CLI runs itself ends before the CLI exits. A second signal (Hurry) stops waiting.
    const reading = yield* Effect.forkScoped(ended)
    const heard = Fiber.join(reading).pipe(Effect.onInterrupt(() => untilHurried(Effect.zipRight(quit, Fiber.await(reading)))))
    return Option.some({ ended: heard, quit })
  })
