import type { FileSystem, Path } from "@effect/platform"
import { Chunk, Clock, Duration, Effect, Fiber, Mailbox, Option, Queue } from "effect"
import type { Paths } from "../config/Paths.js"
import { ceilingDuration } from "../box/ceiling.js"
import { preflightError } from "../box/preflight.js"
import { openBox } from "../box/openBox.js"
import { prepareRun } from "../box/prepareRun.js"
import { appendChannel, recentChannel } from "../journal/channel.js"
import { readEvent } from "../contract/piEvents.js"
import type { Files } from "../fs/Files.js"
import { runFiles } from "../contract/runFiles.js"
import type { ChatPlace, RunOrigin } from "../contract/origin.js"
import { startRun } from "../box/runStart.js"
import { saveRunContext } from "../run/runContext.js"
import { RunLog } from "../run/RunLog.js"
import { watchInbox } from "./inbox.js"
import { compileTurn, type SessionMessage } from "./turnContext.js"
import { initialTurnState, nextMessage, type SessionEndReason, step, type Surface, type TurnInput, type TurnOutput } from "./turns.js"

export type { SessionEndReason }

/** A warm session: the worker, its inbox of messages (one turn each), and callbacks for what the box says. */
export interface SessionRequest {
  readonly worker: string
  readonly inbox: Mailbox.ReadonlyMailbox<SessionMessage>
  /** "abort" stops the turn in flight (pi's abort); the session goes on. */
  readonly controls?: Queue.Dequeue<"abort">
  /** On a chat surface replies leave the box only through a send tool; text without one is reported as undelivered. */
  readonly surface: Surface
  readonly onReply?: (text: string) => Effect.Effect<void>
  /** What the box sends its person with message_user, as pi calls the tool. */
  readonly onMessage?: (text: string) => Effect.Effect<void>
  readonly onEvent?: (line: string) => Effect.Effect<void>
  readonly onTurnEnd?: (turn: number) => Effect.Effect<void>
  readonly onNote?: (text: string) => Effect.Effect<void>
  /** The box is up and the first message can be taken. */
  readonly onReady?: (runId: string) => Effect.Effect<void>
  /** The channel the session serves: its history mounted, each turn and reply appended to it, its recent past on the first turn. */
  readonly channel?: string | null
  /** Who opened the session (default: a person at the CLI; the web's Talk page says web). */
  readonly origin?: RunOrigin
  /** A chat session's service and channel. */
  readonly chat?: ChatPlace
  /** A chat turn that answered without the send tool: what was done with its text (`[[chat]] unsent`). */
  readonly onUnsent?: (turn: number, text: string, message: SessionMessage | undefined) => Effect.Effect<"notice" | "post" | "drop">
  /** This session's own idle timeout and whole-session ceiling (a `[[chat.channel]]`'s), over `[box]`'s. */
  readonly limits?: { readonly idleSecs?: number | undefined; readonly ceilingMin?: number | undefined }
}

/** How a warm session ended: its run, why, whether cleanly, and how many turns it served. */
export interface SessionOutcome {
  readonly runId: string
  readonly runDir: string
  readonly reason: SessionEndReason
  readonly clean: boolean
  readonly turns: number
  /** Messages taken from the inbox that no turn served (the session ended first): its caller may serve them elsewhere. */
  readonly unserved: ReadonlyArray<SessionMessage>
}

/** What the runner waits on: the state machine's inputs, and raw lines not yet read. */
type RunnerInput = TurnInput | { readonly _tag: "line"; readonly line: string }

/**
 * A warm session (seed run_session): one box running pi in rpc mode, serving an inbox of
 * messages as distinct turns of one conversation. The box is `openBox`'s, exactly as a
 * one-shot run's; the turns are the pure state machine in turns.ts; this runner owns time
 * (idle between turns only, a per-turn ceiling, a whole-session ceiling) and I/O.
 */
export const runSession = Effect.fn("session.run")(function*(req: SessionRequest) {
  const { runId, org, settings, mounts, channel } = yield* prepareRun({
    worker: req.worker,
    channel: req.channel,
    limits: { idleSecs: req.limits?.idleSecs, sessionCeilingMin: req.limits?.ceilingMin }
  })

  return yield* Effect.gen(function*() {
    const { context: start, record, runContext } = yield* startRun({
      runId,
      worker: req.worker,
      kind: "session",
      taskId: null,
      surface: req.surface,
      origin: req.origin ?? { _tag: "person", via: req.surface === "web-session" ? "web" : "cli" },
      prompt: null,
      mounts,
      channel,
      chat: req.chat,
      replyTo: null,
      continues: null,
      org
    })
    const note = req.onNote ?? ((t: string) => Effect.logInfo(`session ${runId}: ${t}`))
    const inputs = yield* Queue.unbounded<RunnerInput>()
    const box = yield* openBox({
      record, kind: "session", taskId: null, ceilingMin: null, mode: "rpc", org, settings, mounts, channel,
      piArgs: ["--session-id", start.cache.route_key, "--append-system-prompt", start.system_prompt],
      chatSend: req.surface === "chat-session" ? req.chat?.provider : undefined,
      onLine: (line) => inputs.offer({ _tag: "line", line })
    })
    yield* box.stdoutEnded.pipe(Effect.zipRight(inputs.offer({ _tag: "died" })), Effect.forkScoped)
    // A message is taken and queued in one step that an interrupt cannot split, so none is lost between the two.
    const reader = yield* Effect.forever(Effect.uninterruptibleMask((restore) =>
      restore(req.inbox.take).pipe(Effect.flatMap((message) => inputs.offer({ _tag: "msg", message })))
    )).pipe(
      Effect.catchAll(() => inputs.offer({ _tag: "closed" })),
      Effect.forkScoped
    )
    if (req.controls) yield* Effect.forever(Queue.take(req.controls).pipe(Effect.zipRight(inputs.offer({ _tag: "abort" })))).pipe(Effect.forkScoped)
    // A task's answer sent to this session (reply_to talk:<run-id>) arrives as a turn of its own.
    yield* watchInbox(runId, (message) =>
      note(`${message.author} answered: delivered here as a message`).pipe(Effect.zipRight(inputs.offer({ _tag: "msg", message })))).pipe(
        Effect.catchAllCause((c) => Effect.logError(`session ${runId}: its inbox could not be read`, c)),
        Effect.forkScoped
      )
    if (req.onReady) yield* req.onReady(runId)

    const runLog = yield* RunLog
    const send = (command: unknown) => box.write(`${JSON.stringify(command)}\n`)
    const idle = Duration.toMillis(Duration.seconds(org.box.idle_secs))
    const turnCeiling = Duration.toMillis(ceilingDuration(org.box.turn_ceiling_min))
    // The session's clock starts once: its deadline and its first idle period from the same moment.
    const openedAt = yield* Clock.currentTimeMillis
    const sessionDeadline = openedAt + Duration.toMillis(ceilingDuration(org.box.session_ceiling_min))
    let state = initialTurnState
    let turnStarted = 0
    let serving: SessionMessage | undefined
    let idleSince = openedAt
    const undelivered: Array<{ readonly turn: number; readonly chars: number; readonly handled: "notice" | "post" | "drop" }> = []

    /** Carries out what the state machine asked for; an `end` output is the session's reason. */
    const perform = (outputs: ReadonlyArray<TurnOutput>) =>
      Effect.gen(function*() {
        for (const o of outputs) {
          switch (o._tag) {
            case "reply":
              if (channel !== null) yield* appendChannel(channel, { author: req.worker, text: o.text, run_id: runId })
              if (req.onReply) yield* req.onReply(o.text)
              break
            case "message":
              if (req.onMessage) yield* req.onMessage(o.text)
              break
            case "abort":
              yield* send({ type: "abort" }).pipe(Effect.ignore)
              break
            case "note":
              yield* note(o.text)
              break
            case "unsent": {
              const handled = req.onUnsent ? yield* req.onUnsent(o.turn, o.text, serving) : "drop"
              undelivered.push({ turn: o.turn, chars: o.text.length, handled })
              yield* record.note({ undelivered: [...undelivered] })
              break
            }
            case "turn-end":
              idleSince = yield* Clock.currentTimeMillis
              if (req.onTurnEnd) yield* req.onTurnEnd(o.turn)
              break
            case "end":
              return o.reason
          }
        }
        return undefined
      })
    const feed = (input: TurnInput) => {
      const [next, outputs] = step(state, input, req.surface)
      state = next
      return perform(outputs)
    }

    /** Prompts the next pending message when pi is free: one turn at a time, in order. */
    const promptNext: Effect.Effect<SessionEndReason | undefined, never, Files | Paths | FileSystem.FileSystem | Path.Path> = Effect.gen(function*() {
      const next = nextMessage(state)
      if (!next) return undefined
      // A session of a channel starts from the channel's recent past, unless its caller brought its own.
      const message = channel !== null && state.turns === 0 && next.history === undefined
        ? { ...next, history: yield* recentChannel(channel).pipe(Effect.orElseSucceed(() => [])) }
        : next
      // The run context says whose message this turn serves before pi sees it: a context that cannot be saved drops the message, not the session.
      const saved = yield* saveRunContext({
        ...runContext,
        turns: state.turns + 1,
        taints: (yield* runLog.read(req.worker, runId))?.tainted ?? [],
        last_message: { author: message.author, role: message.role ?? "person" },
        // A chat session's answers go to the thread of the message this turn serves.
        ...(message.place ? { chat: message.place } : {}),
        saved_at: new Date(yield* Clock.currentTimeMillis).toISOString()
      }).pipe(Effect.either)
      const input = saved._tag === "Left"
        ? yield* note(`a message could not be delivered: ${saved.left.message}`).pipe(Effect.as(Option.none<string>()))
        : yield* compileTurn(message, state.turns + 1, runFiles(record.runDir).turns, start.start_preamble).pipe(
          Effect.tapError((e) => note(`a message could not be prepared and was not delivered: ${e.message}`)),
          Effect.option
        )
      if (Option.isNone(input)) return (yield* feed({ _tag: "skipped" })) ?? (yield* promptNext)
      const written = yield* send({ type: "prompt", message: input.value }).pipe(Effect.either)
      if (written._tag === "Left") return "box-died" as const
      turnStarted = yield* Clock.currentTimeMillis
      serving = message
      if (channel !== null) yield* appendChannel(channel, { author: message.author, text: message.text, run_id: runId })
      return yield* feed({ _tag: "prompted" })
    })

    const reason: SessionEndReason = yield* Effect.gen(function*() {
      for (;;) {
        const ended = yield* promptNext
        if (ended) return ended
        const now = yield* Clock.currentTimeMillis
        const deadline = Math.min(sessionDeadline, state.busy ? turnStarted + turnCeiling : idleSince + idle)
        const next = yield* Queue.take(inputs).pipe(Effect.timeoutOption(Duration.millis(Math.max(0, deadline - now))))
        if (Option.isNone(next)) {
          if ((yield* Clock.currentTimeMillis) >= sessionDeadline) return "session-ceiling"
          return state.busy ? "turn-ceiling" : "idle"
        }
        const input = next.value
        if (input._tag === "line" && req.onEvent) yield* req.onEvent(input.line)
        const end = yield* feed(input._tag === "line" ? { _tag: "event", event: readEvent(input.line) } : input)
        if (end) return end
      }
    })
    // Whatever was taken but not served is handed back, not dropped with the box.
    yield* Fiber.interrupt(reader)
    const unserved = [
      ...state.pending,
      ...Chunk.toReadonlyArray(yield* Queue.takeAll(inputs)).flatMap((i) => (i._tag === "msg" ? [i.message] : []))
    ]
    const clean = reason === "closed" || reason === "idle" || (reason === "session-ceiling" && !state.busy)
    if (reason === "session-ceiling") yield* note(`reached the session ceiling (${org.box.session_ceiling_min} min); ending`)
    if (reason === "turn-ceiling") yield* note(`a turn ran past the turn ceiling (${org.box.turn_ceiling_min} min); ending`)
    // Closing stdin ends pi cleanly; the scope kills whatever is left.
    yield* box.closeStdin
    yield* box.exited.pipe(Effect.timeout("5 seconds"), Effect.ignore)
    const failedPreflight = preflightError(yield* box.preflight, box.spec.HostConfig.NetworkMode)
    if (failedPreflight) yield* note(failedPreflight)
    yield* record.settle({
      endedBy: reason,
      exitCode: clean ? 0 : null,
      ...(clean ? {} : {
        error: failedPreflight ?? (reason === "box-died" ? "the session box exited before completing the turn" : `ended by ${reason} mid-turn`)
      })
    })
    return { runId, runDir: record.runDir, reason, clean, turns: state.turns, unserved } satisfies SessionOutcome
  }).pipe(Effect.scoped)
})
