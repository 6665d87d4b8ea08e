import { Cause, Clock, Effect, Mailbox, Option, Ref, type Scope } from "effect"
import type { ChatPlace } from "../contract/origin.js"
import type { SessionOutcome } from "../session/runSession.js"
import type { HistoryLine, SessionMessage } from "../session/turnContext.js"
import { type Backlog, bounded, memoryBacklog, type Waiting, withBacklog } from "./backlog.js"

/** A chat message on its way to a turn: the session message and the place its answer goes. */
export type ChatMessage = SessionMessage & { readonly place: ChatPlace }

/** What a desk needs of the daemon: a warm session over an inbox (holding its box slot), and a way to post in the channel. */
export interface DeskEnv {
  readonly runSession: (
    inbox: Mailbox.ReadonlyMailbox<SessionMessage>,
    first: ChatMessage,
    onReady: (runId: string) => Effect.Effect<void>
  ) => Effect.Effect<SessionOutcome, { readonly message: string }>
  /** The session ended: said in the thread of the last message it took. */
  readonly onEnd: (outcome: SessionOutcome, last: ChatPlace) => Effect.Effect<void>
  readonly onFail: (message: string, last: ChatPlace) => Effect.Effect<void>
  readonly onReady: (runId: string, first: ChatPlace) => Effect.Effect<void>
  /** The recent past of the place a session's first message came from, when the service gives it. */
  readonly past?: (first: ChatMessage) => Effect.Effect<ReadonlyArray<HistoryLine> | undefined>
  /** Where the messages waiting for the next session are kept: a restart of the daemon does not lose them. */
  readonly backlog?: Backlog
  /** Messages dropped from what waits (past its bound in their thread): their threads are told. */
  readonly onDropped?: (dropped: ReadonlyArray<ChatMessage>) => Effect.Effect<void>
}

/** One mapped channel's desk: at most one warm session at a time, started by a message, ended by its idle timeout. */
export interface Desk {
  readonly offer: (m: ChatMessage) => Effect.Effect<void>
  /** The live session's run id, once its box is up. */
  readonly session: Effect.Effect<string | null>
}

interface Live {
  readonly inbox: Mailbox.Mailbox<SessionMessage>
  readonly runId: Ref.Ref<string | null>
  readonly last: Ref.Ref<ChatPlace>
  /** What waited for this session, given to its first turn as history: waiting again if it serves nothing. */
  readonly carried: ReadonlyArray<Waiting>
}

/** A message as it waits: without the history its session's first turn was given. */
const bare = ({ history: _history, ...m }: ChatMessage): ChatMessage => m

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`

/**
 * A desk for one `[[chat.channel]]`. A message goes to the live session's inbox (mid-turn, it
 * waits its turn there); with none live, a session starts with it. A session that ends with
 * messages it never served hands them to the next session, so a message that came as the last
 * one idled out is answered, not lost. Messages a session could not serve at all (it failed, or
 * took no turn) wait — on disk, a bounded number per thread — for the next session, which a new
 * message starts: they are its first turn's history, not turns replayed long after. Sessions run
 * in the desk's scope (the daemon's).
 */
export const makeDesk = (env: DeskEnv): Effect.Effect<Desk, never, Scope.Scope> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const lock = yield* Effect.makeSemaphore(1)
    const current = yield* Ref.make<Live | null>(null)
    const backlog = env.backlog ?? memoryBacklog
    const waiting = yield* Ref.make<ReadonlyArray<Waiting>>(yield* backlog.load)

    /** Adds to what waits (kept on disk, bounded per thread; the dropped ones' threads told): how many wait now. */
    const wait = (more: ReadonlyArray<ChatMessage | Waiting>) =>
      Effect.gen(function*() {
        const at = new Date(yield* Clock.currentTimeMillis).toISOString()
        const stamped = more.map((m): Waiting => ("since" in m ? m : { ...bare(m), since: at }))
        const { kept, dropped } = bounded([...(yield* Ref.get(waiting)), ...stamped])
        yield* Ref.set(waiting, kept)
        yield* backlog.save(kept)
        if (dropped.length > 0 && env.onDropped) yield* env.onDropped(dropped)
        return kept.length
      })

    const ended = (live: Live, outcome: SessionOutcome | { readonly failed: string }) =>
      lock.withPermits(1)(Effect.gen(function*() {
        const left = [...("unserved" in outcome ? outcome.unserved : []), ...(yield* live.inbox.clear)]
        yield* Ref.set(current, null)
        const last = yield* Ref.get(live.last)
        const next = left.filter((m): m is ChatMessage => "place" in m && m.place !== undefined)
        if ("failed" in outcome) {
          // Not tried again on their own (a session that cannot start would fail again at once): the next message takes them.
          const n = next.length === 0 && live.carried.length === 0 ? 0 : yield* wait([...live.carried, ...next])
          const kept = n === 0 ? "" : ` — ${plural(n, "message", "messages")} not yet answered wait${n === 1 ? "s" : ""} for the next session (your next message starts it)`
          return yield* env.onFail(`${outcome.failed}${kept}`, last)
        }
        yield* env.onEnd(outcome, last)
        // A session that served nothing is not tried again on its own: what it had waits for the next message.
        if (outcome.turns === 0) return yield* wait([...live.carried, ...next]).pipe(Effect.when(() => next.length + live.carried.length > 0))
        // What waited reached the worker (its first turn's history): no longer kept.
        if (live.carried.length > 0) yield* backlog.save(yield* Ref.get(waiting))
        if (next.length > 0) yield* start(next, [])
      }))

    // However a session fails it ends, and the channel hears so: a defect (a bug) left the desk
    // offering the channel's next messages to a session that was gone — a channel gone deaf.
    const failed = (live: Live, cause: Cause.Cause<{ readonly message: string }>) =>
      Cause.isInterruptedOnly(cause) ? Effect.void : Option.match(Cause.failureOption(cause), {
        onSome: (e) => ended(live, { failed: e.message }),
        onNone: () =>
          Effect.logError("chat: a session failed unexpectedly", cause).pipe(
            Effect.zipRight(ended(live, { failed: "roster failed unexpectedly (the daemon's log says why)" }))
          )
      })

    const start = (messages: ReadonlyArray<ChatMessage>, carried: ReadonlyArray<Waiting>): Effect.Effect<void> =>
      Effect.gen(function*() {
        const head = messages[0]
        if (!head) return
        // The session's first turn starts from the place's own past (the thread it was asked in), and what waited for it.
        const history = withBacklog(env.past ? yield* env.past(head) : undefined, carried, head.place)
        const first: ChatMessage = history === undefined ? head : { ...head, history }
        const live: Live = {
          inbox: yield* Mailbox.make<SessionMessage>(),
          runId: yield* Ref.make<string | null>(null),
          last: yield* Ref.make(messages.at(-1)?.place ?? first.place),
          carried
        }
        yield* live.inbox.offerAll([first, ...messages.slice(1)])
        yield* Ref.set(current, live)
        yield* env.runSession(live.inbox, first, (runId) => Ref.set(live.runId, runId).pipe(Effect.zipRight(env.onReady(runId, first.place)))).pipe(
          Effect.matchCauseEffect({ onFailure: (cause) => failed(live, cause), onSuccess: (o) => ended(live, o) }),
          Effect.forkIn(scope)
        )
      })

    return {
      offer: (m) =>
        lock.withPermits(1)(Effect.gen(function*() {
          const live = yield* Ref.get(current)
          if (live && (yield* live.inbox.offer(m))) return yield* Ref.set(live.last, m.place)
          yield* start([m], yield* Ref.getAndSet(waiting, []))
        })),
      session: Ref.get(current).pipe(Effect.flatMap((c) => (c ? Ref.get(c.runId) : Effect.succeed(null))))
    } satisfies Desk
  })
