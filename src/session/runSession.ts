import { FileSystem, Path } from "@effect/platform"
import { Cause, Clock, Console, Duration, Effect, Fiber, Mailbox, Option, Queue, Stream } from "effect"
import { ceilingDuration } from "../box/ceiling.js"
import { acquireContainer } from "../box/container.js"
import { compileContext } from "../box/context.js"
import { provisionBox } from "../box/provision.js"
import { containerSpec } from "../box/spec.js"
import { snapshotStore } from "../box/store.js"
import { validateWorkerName } from "../config/names.js"
import { OrgConfig } from "../config/OrgConfig.js"
import { mountsFor } from "../config/schema.js"
import { Docker } from "../docker/Docker.js"
import { causeText } from "../run/causeText.js"
import { newRunId } from "../run/runId.js"
import { RunLog } from "../run/RunLog.js"
import { readIdentity, readWorkerSettings } from "../worker/workers.js"
import { isSendTool, readEvent } from "./events.js"
import { compileTurn, type SessionMessage } from "./turnContext.js"

export type SessionEndReason = "idle" | "closed" | "session-ceiling" | "turn-ceiling" | "box-died"

export interface SessionRequest {
  readonly worker: string
  readonly inbox: Mailbox.ReadonlyMailbox<SessionMessage>
  /** "abort" stops the turn in flight (pi's abort); the session goes on. */
  readonly controls?: Queue.Dequeue<"abort">
  /** On a chat surface replies leave the box only through a send tool; text without one is reported as undelivered. */
  readonly surface: "term-session" | "chat-session"
  readonly onReply?: (text: string) => Effect.Effect<void>
  /** What the box sends its person with message_user, as pi calls the tool. */
  readonly onMessage?: (text: string) => Effect.Effect<void>
  readonly onEvent?: (line: string) => Effect.Effect<void>
  readonly onTurnEnd?: (turn: number) => Effect.Effect<void>
  readonly onNote?: (text: string) => Effect.Effect<void>
  /** The box is up and the first message can be taken. */
  readonly onReady?: (runId: string) => Effect.Effect<void>
}

export interface SessionOutcome {
  readonly runId: string
  readonly runDir: string
  readonly reason: SessionEndReason
  readonly clean: boolean
  readonly turns: number
}

type Ev =
  | { readonly _tag: "msg"; readonly message: SessionMessage }
  | { readonly _tag: "closed" }
  | { readonly _tag: "line"; readonly line: string }
  | { readonly _tag: "died" }
  | { readonly _tag: "abort" }

/**
 * A warm session (seed run_session): one box running pi in rpc mode, serving an inbox of
 * messages as distinct turns of one conversation. A message becomes a prompt only when the
 * previous turn has ended, so rapid messages stay distinct and in order. Bounds: idle between
 * turns only, a per-turn ceiling, a whole-session ceiling; the inbox closing with nothing in
 * flight ends it at once.
 */
export const runSession = Effect.fn("session.run")(function*(req: SessionRequest) {
  yield* validateWorkerName(req.worker)
  yield* readIdentity(req.worker)
  const org = yield* (yield* OrgConfig).snapshot
  const settings = yield* readWorkerSettings(req.worker)
  const runLog = yield* RunLog
  const path = yield* Path.Path
  const fs = yield* FileSystem.FileSystem
  const runId = yield* newRunId
  yield* runLog.start({ runId, worker: req.worker, kind: "session" })
  const runDir = runLog.runDir(req.worker, runId)
  const note = req.onNote ?? ((t: string) => Console.error(`session ${runId}: ${t}`))
  let turns = 0

  const session = Effect.gen(function*() {
    const start = yield* compileContext({
      runId, worker: req.worker, surface: "term-session", prompt: null,
      mounts: mountsFor(org, req.worker)
    }, path.join(runDir, "context.json"))
    const { plan } = yield* provisionBox({ worker: req.worker, runId, taskId: null, kind: "session", ceilingMin: null, mode: "rpc", org, settings })
    const spec = containerSpec({
      ...plan,
      piArgs: ["--session-id", start.cache.route_key, "--append-system-prompt", start.system_prompt]
    })
    yield* runLog.update(req.worker, runId, { container: spec.name, image: spec.Image })
    const docker = yield* Docker
    const id = yield* acquireContainer(spec)
    const attached = yield* docker.containerAttach(id)
    const exited = yield* docker.containerWait(id)
    const events = yield* Queue.unbounded<Ev>()
    const transcript = yield* fs.open(path.join(runDir, "stdout.jsonl"), { flag: "w" }).pipe(
      Effect.tapError((e) => note(`could not open the transcript (${e.message}); it will be missing`)),
      Effect.option
    )
    const stderrLog = yield* fs.open(path.join(runDir, "stderr.log"), { flag: "w" }).pipe(Effect.option)
    const encoder = new TextEncoder()
    yield* attached.stdout.pipe(
      Stream.decodeText(),
      Stream.splitLines,
      Stream.runForEach((line) =>
        Effect.all([
          Option.match(transcript, { onNone: () => Effect.void, onSome: (f) => f.writeAll(encoder.encode(`${line}\n`)).pipe(Effect.ignore) }),
          events.offer({ _tag: "line", line })
        ])),
      Effect.ignore,
      Effect.zipRight(events.offer({ _tag: "died" })),
      Effect.forkScoped
    )
    // pi's stderr is not part of a conversation: it goes to a file beside the transcript.
    yield* Stream.runForEach(attached.stderr, (c) =>
      Option.match(stderrLog, { onNone: () => Effect.void, onSome: (f) => f.writeAll(c).pipe(Effect.ignore) })).pipe(Effect.ignore, Effect.forkScoped)
    yield* Effect.forever(req.inbox.take.pipe(Effect.flatMap((message) => events.offer({ _tag: "msg", message })))).pipe(
      Effect.catchAll(() => events.offer({ _tag: "closed" })),
      Effect.forkScoped
    )
    if (req.controls) yield* Effect.forever(Queue.take(req.controls).pipe(Effect.zipRight(events.offer({ _tag: "abort" })))).pipe(Effect.forkScoped)
    yield* docker.containerStart(id)
    const waiting = yield* Effect.forkScoped(exited)
    if (req.onReady) yield* req.onReady(runId)

    const send = (command: unknown) => attached.write(`${JSON.stringify(command)}\n`)
    const idle = Duration.toMillis(Duration.seconds(org.box.idle_secs))
    const turnCeiling = Duration.toMillis(ceilingDuration(org.box.turn_ceiling_min))
    const sessionDeadline = (yield* Clock.currentTimeMillis) + Duration.toMillis(ceilingDuration(org.box.session_ceiling_min))
    const pending: Array<SessionMessage> = []
    let inboxOpen = true
    let busy = false
    let turnStarted = 0
    let idleSince = yield* Clock.currentTimeMillis
    // After a turn ends on agent_end, pi still settles that run; its agent_settled must not end the next turn.
    let staleSettle = false
    let sawStart = false
    let droppedChars = 0
    let sent = false

    const endTurn = Effect.gen(function*() {
      if (req.surface === "chat-session" && droppedChars > 0 && !sent) {
        yield* note(`turn ${turns} ended with assistant text (${droppedChars} chars) but no send action — not delivered to the channel`)
      }
      droppedChars = 0
      sent = false
      busy = false
      idleSince = yield* Clock.currentTimeMillis
      if (req.onTurnEnd) yield* req.onTurnEnd(turns)
    })

    const reason = yield* Effect.gen(function*() {
      for (;;) {
        if (!inboxOpen && !busy && pending.length === 0) return "closed" as const
        while (!busy && pending.length > 0) {
          const message = pending.shift() as SessionMessage
          const input = yield* compileTurn(message, turns + 1, path.join(runDir, "turns.jsonl")).pipe(
            Effect.tapError((e) => note(`a message could not be prepared and was not delivered: ${e instanceof Error ? e.message : String(e)}`)),
            Effect.option
          )
          if (Option.isNone(input)) continue
          const written = yield* send({ type: "prompt", message: input.value }).pipe(Effect.either)
          if (written._tag === "Left") return "box-died" as const
          turns++
          busy = true
          sawStart = false
          turnStarted = yield* Clock.currentTimeMillis
        }
        if (!inboxOpen && !busy && pending.length === 0) return "closed" as const
        const now = yield* Clock.currentTimeMillis
        const deadline = Math.min(sessionDeadline, busy ? turnStarted + turnCeiling : idleSince + idle)
        const next = yield* Queue.take(events).pipe(Effect.timeoutOption(Duration.millis(Math.max(0, deadline - now))))
        if (Option.isNone(next)) {
          const at = yield* Clock.currentTimeMillis
          if (at >= sessionDeadline) return "session-ceiling" as const
          if (busy) return "turn-ceiling" as const
          return "idle" as const
        }
        const ev = next.value
        switch (ev._tag) {
          case "msg":
            pending.push(ev.message)
            break
          case "closed":
            inboxOpen = false
            break
          case "died":
            return "box-died" as const
          case "abort":
            if (busy) yield* send({ type: "abort" }).pipe(Effect.ignore)
            break
          case "line": {
            if (req.onEvent) yield* req.onEvent(ev.line)
            const e = readEvent(ev.line)
            if (e.kind === "assistant-text") {
              if (req.surface === "chat-session") droppedChars += e.text.length
              else if (req.onReply) yield* req.onReply(e.text)
            } else if (e.kind === "tool-start" && isSendTool(e.name)) {
              sent = true
              const text = (e.args as { text?: unknown } | undefined)?.text
              if (e.name === "message_user" && typeof text === "string" && req.onMessage) yield* req.onMessage(text)
            } else if (e.kind === "agent-start") {
              sawStart = true
              staleSettle = false
            } else if (busy && e.kind === "turn-end") {
              staleSettle = true
              yield* endTurn
            } else if (busy && e.kind === "settled" && !(staleSettle && !sawStart)) {
              yield* endTurn
            } else if (busy && e.kind === "refused") {
              yield* note(`pi refused the message: ${e.error}`)
              yield* endTurn
            }
            break
          }
        }
      }
    })
    const clean = reason === "closed" || reason === "idle" || (reason === "session-ceiling" && !busy)
    if (reason === "session-ceiling") yield* note(`reached the session ceiling (${org.box.session_ceiling_min} min); ending`)
    if (reason === "turn-ceiling") yield* note(`a turn ran past the turn ceiling (${org.box.turn_ceiling_min} min); ending`)
    // Closing stdin ends pi cleanly; the container's finalizer kills whatever is left.
    yield* attached.closeStdin
    yield* Fiber.join(waiting).pipe(Effect.timeout("5 seconds"), Effect.ignore)
    return { reason, clean }
  }).pipe(Effect.scoped)

  const snapshot = snapshotStore(req.worker, runId, settings.store.snapshots).pipe(Effect.ignore)
  const end = yield* session.pipe(
    Effect.onError((cause) =>
      snapshot.pipe(
        Effect.zipRight(runLog.finish(req.worker, runId, {
          endedBy: Cause.isInterruptedOnly(cause) ? "signal" : "error",
          exitCode: null,
          ...(Cause.isInterruptedOnly(cause) ? {} : { error: causeText(cause) })
        })),
        Effect.ignore,
        Effect.uninterruptible
      )
    )
  )
  yield* snapshot
  yield* runLog.finish(req.worker, runId, {
    endedBy: end.reason,
    exitCode: end.clean ? 0 : null,
    ...(end.clean ? {} : { error: end.reason === "box-died" ? "the session box exited before completing the turn" : `ended by ${end.reason} mid-turn` })
  })
  return { runId, runDir, reason: end.reason, clean: end.clean, turns } satisfies SessionOutcome
})
