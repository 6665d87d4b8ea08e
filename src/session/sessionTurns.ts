import type { FileSystem, Path } from "@effect/platform"
import { Clock, Duration, Effect, Option, Queue } from "effect"
import { ceilingDuration } from "../box/ceiling.js"
import type { Paths } from "../config/Paths.js"
import type { Org } from "../config/schema.js"
import { readEvent } from "../contract/piEvents.js"
import type { RunContext } from "../contract/runContext.js"
import { runFiles } from "../contract/runFiles.js"
import type { Files } from "../fs/Files.js"
import { appendChannel, type ChannelEntry, recentChannel } from "../journal/channel.js"
import type { OpenRecord } from "../run/record.js"
import { saveRunContext } from "../run/runContext.js"
import { RunLog } from "../run/RunLog.js"
import type { SessionRequest } from "./sessionRequest.js"
import { compileTurn, type HistoryLine, type SessionMessage } from "./turnContext.js"
import { takeFiles } from "./messageFiles.js"
import { initialTurnState, nextMessage, type SessionEndReason, step, type TurnInput, type TurnOutput } from "./turns.js"

/** The channel's past as a first turn reads it: the worker's own words marked as its own. */
const historyLines = (entries: ReadonlyArray<ChannelEntry>, worker: string): ReadonlyArray<HistoryLine> =>
  entries.map((e) => ({
    author: e.author,
    text: e.text,
    ...(e.role === "worker" ? { speaker: e.author === worker ? "you" as const : "worker" as const } : {})
  }))

/** What the runner waits on: the state machine's inputs, and raw lines not yet read. */
export type RunnerInput = TurnInput | { readonly _tag: "line"; readonly line: string }

/** What a session's turns run with: its request, run, box and the queue its inputs arrive on. */
export interface SessionTurns {
  readonly req: SessionRequest
  readonly runId: string
  readonly channel: string | null
  readonly org: Org
  /** When the session's ceiling ends it (ms since the epoch): the deadline its prologue read, the box's label. */
  readonly deadline: number
  readonly record: OpenRecord
  readonly runContext: RunContext
  readonly startPreamble: string | undefined
  readonly inputs: Queue.Queue<RunnerInput>
  /** One rpc command to pi. */
  readonly send: (command: unknown) => Effect.Effect<void, unknown>
  readonly note: (text: string) => Effect.Effect<void>
}

/**
 * The turns of a warm session: the pure state machine (turns.ts) fed from the inputs, each
 * output carried out, the next message prompted when pi is free. `serve` runs until the state
 * machine or the clock (idle between turns, a per-turn ceiling, the session ceiling) ends it.
 */
export const makeSessionTurns = ({ channel, deadline, inputs, note, org, record, req, runContext, runId, send, startPreamble }: SessionTurns) =>
  Effect.gen(function*() {
    const runLog = yield* RunLog
    const idle = Duration.toMillis(Duration.seconds(org.box.idle_secs))
    const turnCeiling = Duration.toMillis(ceilingDuration(org.box.turn_ceiling_min))
    // Its deadline is the one its prologue read (the box's label); its first idle period starts now.
    const openedAt = yield* Clock.currentTimeMillis
    const sessionDeadline = deadline
    let state = initialTurnState
    let turnStarted = 0
    let serving: SessionMessage | undefined
    let idleSince = openedAt
    const undelivered: Array<{ readonly turn: number; readonly chars: number; readonly handled: "notice" | "post" | "drop"; readonly post_failed?: true }> = []
    let unsentPosted = false

    /** Carries out what the state machine asked for; an `end` output is the session's reason. */
    const perform = (outputs: ReadonlyArray<TurnOutput>) =>
      Effect.gen(function*() {
        for (const o of outputs) {
          switch (o._tag) {
            case "reply":
              if (channel !== null) yield* appendChannel(channel, { author: req.worker, text: o.text, run_id: runId, role: "worker" })
              if (req.onReply) yield* req.onReply(o.text)
              break
            case "message":
              if (req.onMessage) yield* req.onMessage(o.text)
              break
            case "send":
              if (req.onSend) yield* req.onSend(o.text)
              break
            case "abort":
              // An abort to a pi that already ended reaches no one: the turn's end comes from its exit all the same.
              yield* send({ type: "abort" }).pipe(Effect.ignore)
              break
            case "note":
              yield* note(o.text)
              break
            case "unsent": {
              const { handled, posted } = req.onUnsent ? yield* req.onUnsent(o.turn, o.text, serving) : { handled: "drop" as const, posted: true }
              undelivered.push({ turn: o.turn, chars: o.text.length, handled, ...(posted ? {} : { post_failed: true }) })
              // Posted, the answer is in the thread: the worker's words there, as a send's are (the channel's next session reads them).
              unsentPosted = handled === "post" && posted
              if (unsentPosted && channel !== null) yield* appendChannel(channel, { author: req.worker, text: o.text, run_id: runId, role: "worker" })
              yield* record.note({ undelivered: [...undelivered] })
              break
            }
            case "turn-end":
              idleSince = yield* Clock.currentTimeMillis
              if (req.onTurnEnd) yield* req.onTurnEnd(o.turn, { delivered: o.sent || unsentPosted, failed: o.failed, message: serving })
              unsentPosted = false
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
      const withPast = channel !== null && state.turns === 0 && next.history === undefined
        ? { ...next, history: historyLines(yield* recentChannel(channel).pipe(Effect.orElseSucceed(() => [])), req.worker) }
        : next
      // The message's files are in the box before pi reads the turn that names them.
      const message = withPast.files && withPast.files.length > 0 && req.files
        ? { ...withPast, fileNotes: yield* takeFiles(withPast.files, withPast.messageId, runFiles(record.runDir).inbox, req.files.fetch, req.files.maxBytes) }
        : withPast
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
      const skipped = (why: string) =>
        note(`a message could not be delivered: ${why}`).pipe(Effect.zipRight(req.onSkipped ? req.onSkipped(message, why) : Effect.void))
      const input = saved._tag === "Left"
        ? yield* skipped(`its run context could not be saved (${saved.left.message})`).pipe(Effect.as(Option.none<string>()))
        : yield* compileTurn(message, state.turns + 1, runFiles(record.runDir).turns, startPreamble).pipe(
          Effect.tapError((e) => skipped(e.message)),
          Effect.option
        )
      if (Option.isNone(input)) return (yield* feed({ _tag: "skipped" })) ?? (yield* promptNext)
      const written = yield* send({ type: "prompt", message: input.value }).pipe(Effect.either)
      if (written._tag === "Left") return "box-died" as const
      turnStarted = yield* Clock.currentTimeMillis
      serving = message
      if (req.onTurnStart) yield* req.onTurnStart(message)
      if (channel !== null) yield* appendChannel(channel, { author: message.author, text: message.text, run_id: runId, role: "person" })
      return yield* feed({ _tag: "prompted" })
    })

    const serveTurns: Effect.Effect<SessionEndReason, never, Files | Paths | FileSystem.FileSystem | Path.Path> = Effect.gen(function*() {
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
    // A session that ends under a turn (its ceiling, the box gone) ends that turn too, unfinished.
    const serve = serveTurns.pipe(Effect.tap(() =>
      state.busy && req.onTurnEnd ? req.onTurnEnd(state.turns, { delivered: state.sent, failed: true, message: serving }) : Effect.void
    ))
    return { serve, state: () => state }
  })
