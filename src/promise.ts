/**
 * `roster/promise`: roster for a program that is not on Effect 3 — plain TypeScript or JavaScript,
 * or Effect 4 — with roster's own Effect bundled inside (it needs none of the caller's). Every
 * run starts through the same Runner the CLI uses, on this machine's Docker engine.
 *
 * @example
 * ```ts
 * import { openRoster } from "roster/promise"
 *
 * const roster = await openRoster()                       // ROSTER_HOME, else ~/.config/roster …
 * const run = await roster.run("alice", "summarise the notes in your store", { ceilingMin: 10 })
 * console.log(run.endedBy, run.finalText)
 * // Every long call takes an AbortSignal: an abort ends the run as Ctrl-C does (box killed, token revoked).
 * await roster.run("alice", "…", { signal: AbortSignal.timeout(60_000) }).catch((e) => e.name === "AbortError")
 * for await (const turn of roster.talk("alice", ["hello", "and what did I just say?"])) console.log(turn.reply)
 * await roster.close()
 * ```
 * @module
 */
import { Effect, Exit, Layer, Logger, LogLevel, Mailbox, ManagedRuntime, Option, Queue } from "effect"
import { viaDaemon } from "./api/controlClient.js"
import { Paths } from "./config/Paths.js"
import { MemoryStore } from "./memory/MemoryStore.js"
import { makeRosterLive } from "./RosterLive.js"
import { Runner } from "./runner/Runner.js"
import type { SessionMessage } from "./session/turnContext.js"
import { cancelInPlace, PERSON, queueTask } from "./supervisor/queueTask.js"
import { isTaskId, NoSuchTask, type TaskRecord } from "./task/TaskRecord.js"
import { TaskStore } from "./task/TaskStore.js"

/** Where the deployment is, and where roster's notes go. */
export interface RosterOptions {
  /** `home` as `ROSTER_HOME` would put it (default: ROSTER_HOME, else the XDG folders). */
  readonly home?: string
  /** Each note roster has for a person (warnings and errors by default: never on your stdout); default: one line each on stderr. */
  readonly log?: (level: "debug" | "info" | "warning" | "error", text: string) => void
  /** The least a note must be to be said (default: "warning"). */
  readonly logLevel?: "debug" | "info" | "warning" | "error"
}

const LEVELS = { debug: LogLevel.Debug, info: LogLevel.Info, warning: LogLevel.Warning, error: LogLevel.Error } as const

/** roster's log as the caller wants it: its own function, or a line each on stderr — the caller's stdout is theirs. */
const loggerFor = (options: RosterOptions) => {
  const say = options.log ?? ((level, text) => void process.stderr.write(`roster ${level}: ${text}\n`))
  const logger = Logger.make(({ logLevel, message }) => {
    const level = logLevel._tag === "Debug" || logLevel._tag === "Trace" ? "debug" : logLevel._tag === "Info" ? "info" : logLevel._tag === "Warning" ? "warning" : "error"
    say(level, (Array.isArray(message) ? message : [message]).map(String).join(" "))
  })
  return Layer.merge(Logger.replace(Logger.defaultLogger, logger), Logger.minimumLogLevel(LEVELS[options.logLevel ?? "warning"]))
}

/** How a one-shot run ended, and where its outputs are (`run.json` in `runDir`). */
export interface RunResult {
  readonly runId: string
  readonly runDir: string
  /** exit, ceiling, budget, cancelled, … */
  readonly endedBy: string
  readonly exitCode: number | null
  /** Why it failed though its box exited (a failed model call, a failed preflight), or null. */
  readonly error: string | null
  readonly finalText: string | null
  /** What the worker sent its person with message_user. */
  readonly messages: ReadonlyArray<string>
}

/** One turn of a conversation: its number and the worker's reply. */
export interface Turn {
  readonly turn: number
  readonly reply: string
}

/** A task as roster keeps it (the fields of `roster task show --json` a program reads most). */
export interface Task {
  readonly task_id: string
  readonly worker: string
  readonly prompt: string
  /** queued, held, running, done, failed or cancelled. */
  readonly status: string
  readonly created_at: string
  readonly started_at: string | null
  readonly finished_at: string | null
  readonly run_ids: ReadonlyArray<string>
  /** Why it is held, failed or cancelled — with the fix when there is one. */
  readonly reason: string | null
  readonly final_text: string | null
  /** Added again with a key in use: this is the task that already had it. */
  readonly existed: boolean
}

const taskOf = (t: TaskRecord & { readonly existed?: boolean | undefined }): Task => ({
  task_id: t.task_id,
  worker: t.worker,
  prompt: t.prompt,
  status: t.status,
  created_at: t.created_at,
  started_at: t.started_at,
  finished_at: t.finished_at,
  run_ids: t.run_ids,
  reason: t.reason,
  final_text: t.final_text ?? null,
  existed: t.existed === true
})

/** What the worker remembers between runs (`roster memory list`). */
export interface MemoryEntry {
  readonly id: string
  readonly text: string
  /** `worker`, or `channel:<name>`. */
  readonly scope: string
  /** Written by a tainted run (or held): briefed only once a person accepts it (`roster memory accept`). */
  readonly pending: boolean
  readonly time: string
}

/** What a long call may be given: an `AbortSignal` that ends it (`Effect.tryPromise`'s, `AbortSignal.timeout(ms)`, a controller's). */
export interface Abortable {
  /**
   * Aborted, the call ends as Ctrl-C ends a run — its box killed, its token revoked, its record finished
   * `signal` — and rejects with an `AbortError` that says so.
   */
  readonly signal?: AbortSignal
}

/** An open roster: runs, conversations, the task queue and workers' memory, until `close`. */
export interface Roster {
  /** One run of `worker` in a box: resolves when it has ended (a ceiling, a budget or the box's own exit). */
  readonly run: (worker: string, prompt: string, options?: { readonly ceilingMin?: number; readonly channel?: string } & Abortable) => Promise<RunResult>
  /** A conversation in one warm box: each of `messages` a turn, each turn's reply yielded as it ends; the box goes when they do. */
  readonly talk: (worker: string, messages: Iterable<string> | AsyncIterable<string>, options?: Abortable) => AsyncIterable<Turn>
  readonly tasks: {
    /** Queues a task (the daemon runs it; while it is down, it waits for it). */
    readonly add: (worker: string, prompt: string, options?: { readonly ceilingMin?: number; readonly after?: string; readonly key?: string }) => Promise<Task>
    readonly list: (filter?: { readonly worker?: string }) => Promise<ReadonlyArray<Task>>
    readonly show: (taskId: string) => Promise<Task>
    readonly cancel: (taskId: string) => Promise<Task>
    /**
     * The task once it has ended (done, failed or cancelled), looked at every `everyMs` (default 1000).
     * Aborted, the wait stops (the task itself goes on: `cancel` ends it).
     */
    readonly wait: (taskId: string, options?: { readonly everyMs?: number } & Abortable) => Promise<Task>
  }
  readonly memory: {
    readonly list: (worker: string) => Promise<ReadonlyArray<MemoryEntry>>
    readonly forget: (worker: string, entryId: string) => Promise<void>
  }
  /** Ends what is open (a conversation's box among it) and lets the process exit. */
  readonly close: () => Promise<void>
}

const errorOf = (cause: unknown) => new Error(cause instanceof Error ? cause.message : String(cause))

/** The rejection of a call its signal aborted: named AbortError (as fetch's), saying what became of its run. */
const abortedError = (signal: AbortSignal, what: string) =>
  Object.assign(new Error(`${what} was aborted (${signal.reason instanceof Error ? signal.reason.message : String(signal.reason ?? "abort")})`), {
    name: "AbortError",
    cause: signal.reason
  })

/**
 * Opens roster over a deployment (one made by `roster init`, or `home`): its services built once,
 * held until `close`. Every method's failure is an `Error` whose message names the fix.
 */
export const openRoster = async (options: RosterOptions = {}): Promise<Roster> => {
  const paths = options.home === undefined ? Paths.layer : Paths.layerAt({ ...Paths.fromEnv({ ROSTER_HOME: options.home, HOME: process.env.HOME }), home: process.env.HOME ?? options.home })
  const runtime = ManagedRuntime.make(Layer.merge(makeRosterLive({ paths }).pipe(Layer.orDie), loggerFor(options)))
  // With a signal, an abort interrupts the call's fiber: its scopes close (the run's box killed, its token revoked,
  // its record finished from the interrupted Exit: `signal`) before the promise rejects.
  const run = <A, E>(effect: Effect.Effect<A, E, Layer.Layer.Success<ReturnType<typeof makeRosterLive>>>, abort?: { readonly signal: AbortSignal; readonly what: string }) =>
    runtime.runPromiseExit(effect, abort ? { signal: abort.signal } : undefined).then((exit) => {
      if (Exit.isSuccess(exit)) return exit.value
      if (abort?.signal.aborted && Exit.isInterrupted(exit)) throw abortedError(abort.signal, abort.what)
      const failure = Exit.causeOption(exit).pipe(Option.flatMap((c) => Option.fromNullable(c._tag === "Fail" ? c.error : undefined)))
      throw Option.isSome(failure) ? errorOf(failure.value) : new Error(String(Exit.isFailure(exit) ? exit.cause : "interrupted"))
    })
  const abortable = (signal: AbortSignal | undefined, what: string) => (signal ? { signal, what } : undefined)
  const task = (taskId: string) => isTaskId(taskId) ? Effect.void : Effect.fail(new Error(`"${taskId}" is not a task id (t-xxxxxxxx)`))

  return {
    run: (worker, prompt, o = {}) =>
      run(
        Effect.flatMap(Runner, (r) => r.once({
          worker,
          prompt,
          channel: o.channel ?? null,
          origin: { _tag: "person", via: "embed" },
          ...(o.ceilingMin !== undefined ? { ceilingMin: o.ceilingMin } : {})
        })).pipe(Effect.map((o): RunResult => ({
          runId: o.runId, runDir: o.runDir, endedBy: o.endedBy, exitCode: o.exitCode, error: o.error, finalText: o.finalText, messages: o.messages
        }))),
        abortable(o.signal, `the run of ${worker} (its box killed, its token revoked, its record finished as ended by signal)`)
      ),
    talk: (worker, messages, o = {}) => talkThrough(run, worker, messages, o.signal),
    tasks: {
      add: (worker, prompt, o = {}) =>
        run(Effect.gen(function*() {
          const req = {
            worker, prompt,
            ...(o.ceilingMin !== undefined ? { ceiling_min: o.ceilingMin } : {}),
            ...(o.after !== undefined ? { after: o.after } : {}),
            ...(o.key !== undefined ? { key: o.key } : {})
          }
          const viaServer = yield* viaDaemon((c) => c.tasks.add({ payload: { ...req, via: "api" } }))
          return taskOf(Option.isSome(viaServer) ? viaServer.value : yield* queueTask(req, { ...PERSON, via: "api" }))
        })),
      list: (filter = {}) =>
        run(Effect.gen(function*() {
          const viaServer = yield* viaDaemon((c) => c.tasks.list({ urlParams: filter.worker !== undefined ? { worker: filter.worker } : {} }))
          const all = Option.isSome(viaServer) ? viaServer.value : yield* (yield* TaskStore).list
          return all.filter((t) => filter.worker === undefined || t.worker === filter.worker).map(taskOf)
        })),
      show: (taskId) =>
        run(Effect.gen(function*() {
          yield* task(taskId)
          const viaServer = yield* viaDaemon((c) => c.tasks.show({ path: { id: taskId } }))
          if (Option.isSome(viaServer)) return taskOf(viaServer.value)
          const store = yield* TaskStore
          return taskOf((yield* store.get(taskId)) ?? (yield* store.getArchived(taskId)) ?? (yield* Effect.fail(new NoSuchTask({ taskId }))))
        })),
      cancel: (taskId) =>
        run(Effect.gen(function*() {
          yield* task(taskId)
          const viaServer = yield* viaDaemon((c) => c.tasks.cancel({ path: { id: taskId } }))
          if (Option.isSome(viaServer)) return taskOf(viaServer.value)
          const t = yield* (yield* TaskStore).get(taskId)
          return taskOf(t ? yield* cancelInPlace(t) : yield* Effect.fail(new NoSuchTask({ taskId })))
        })),
      wait: (taskId, o = {}) =>
        run(
          Effect.gen(function*() {
            yield* task(taskId)
            const every = Math.max(50, o.everyMs ?? 1000)
            for (;;) {
              const viaServer = yield* viaDaemon((c) => c.tasks.show({ path: { id: taskId } }))
              const store = yield* TaskStore
              const t = Option.isSome(viaServer)
                ? viaServer.value
                : (yield* store.get(taskId)) ?? (yield* store.getArchived(taskId)) ?? (yield* Effect.fail(new NoSuchTask({ taskId })))
              if (t.status === "done" || t.status === "failed" || t.status === "cancelled") return taskOf(t)
              yield* Effect.sleep(every)
            }
          }),
          abortable(o.signal, `the wait for task ${taskId} (the task goes on; roster.tasks.cancel ends it)`)
        )
    },
    memory: {
      list: (worker) =>
        run(Effect.flatMap(MemoryStore, (m) => m.list(worker)).pipe(Effect.map((es) => es.map((e): MemoryEntry => ({ id: e.id, text: e.text, scope: e.scope, pending: e.pending, time: e.time }))))),
      forget: (worker, entryId) => run(Effect.flatMap(MemoryStore, (m) => m.forget(worker, entryId, "person:embed")).pipe(Effect.asVoid))
    },
    close: () => runtime.dispose()
  }
}

type RunIn = <A, E>(
  effect: Effect.Effect<A, E, Layer.Layer.Success<ReturnType<typeof makeRosterLive>>>,
  abort?: { readonly signal: AbortSignal; readonly what: string }
) => Promise<A>

/**
 * A conversation as an async iterator: the session runs in the background, each turn's reply handed
 * over as it ends. Aborted, the session is interrupted (its box killed, its token revoked, its record
 * finished `signal`) and the iterator's next call rejects with the AbortError.
 */
const talkThrough = (run: RunIn, worker: string, messages: Iterable<string> | AsyncIterable<string>, signal?: AbortSignal): AsyncIterable<Turn> => ({
  [Symbol.asyncIterator]: () => {
    type Out = { readonly _tag: "turn"; readonly turn: Turn } | { readonly _tag: "end"; readonly error?: Error }
    const setup = run(Effect.all({ out: Queue.unbounded<Out>(), inbox: Mailbox.make<SessionMessage>() }))
    const session = setup.then(async ({ inbox, out }) => {
      // Each message a turn; the inbox ends with them, and the session with its last turn.
      void (async () => {
        let n = 0
        for await (const text of messages) inbox.unsafeOffer({ text, author: process.env.USER ?? "you", provider: "terminal", messageId: String(++n) })
        inbox.unsafeDone(Exit.void)
      })().catch(() => inbox.unsafeDone(Exit.void))
      let said = ""
      const end: Out = await run(Effect.flatMap(Runner, (r) => r.session({
        worker,
        inbox,
        surface: "term-session",
        origin: { _tag: "person", via: "embed" },
        onReply: (text) => Effect.sync(() => void (said = said === "" ? text : `${said}\n${text}`)),
        onTurnEnd: (turn) =>
          Effect.suspend(() => {
            const reply = said
            said = ""
            return Queue.offer(out, { _tag: "turn", turn: { turn, reply } })
          })
      })), signal ? { signal, what: `the talk with ${worker} (its box killed, its token revoked, its record finished as ended by signal)` } : undefined)
        .then((): Out => ({ _tag: "end" }), (e: unknown): Out => ({ _tag: "end", error: e instanceof Error && e.name === "AbortError" ? e : errorOf(e) }))
      await run(Queue.offer(out, end))
    })
    let ended = false
    return {
      next: async (): Promise<IteratorResult<Turn>> => {
        if (ended) return { done: true, value: undefined }
        const { out } = await setup
        const next = await run(Queue.take(out))
        if (next._tag === "turn") return { done: false, value: next.turn }
        ended = true
        await session
        if (next.error) throw next.error
        return { done: true, value: undefined }
      },
      // A loop left early ends the conversation: its box goes once the turn in flight is over.
      return: async (): Promise<IteratorResult<Turn>> => {
        ended = true
        const { inbox } = await setup
        inbox.unsafeDone(Exit.void)
        await session
        return { done: true, value: undefined }
      }
    }
  }
})
