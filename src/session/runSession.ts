import { Chunk, Effect, Fiber, Queue, Ref } from "effect"
import type { TakenWarm } from "../box/warmBox.js"
import { claimWarm } from "../box/warmClaim.js"
import { preflightError } from "../box/preflight.js"
import { openBox } from "../box/openBox.js"
import { prepareRun } from "../box/prepareRun.js"
import { startRun } from "../box/runStart.js"
import { feedInputs } from "./sessionInputs.js"
import { makeSessionTurns, type RunnerInput } from "./sessionTurns.js"
import type { SessionOutcome, SessionRequest } from "./sessionRequest.js"
import type { SessionEndReason } from "./turns.js"
import { RunLog } from "../run/RunLog.js"

export type { SessionEndReason }
export type { SessionOutcome, SessionRequest }

/**
 * A warm session (seed run_session): one box running pi in rpc mode, serving an inbox of
 * messages as distinct turns of one conversation. The box is `openBox`'s, exactly as a
 * one-shot run's; the turns are the pure state machine in turns.ts; this runner owns time
 * (idle between turns only, a per-turn ceiling, a whole-session ceiling) and I/O.
 */
export const runSession = Effect.fn("session.run")(function*(
  req: SessionRequest,
  /** A warm box of this worker, of this session's shape, the Runner took (and checked): the session is its run. The Runner closes it. */
  warm?: TakenWarm
) {
  // A warm box's run was prepared when the box was checked against it: the session is made from what was checked.
  const { ceiling, runId, org, settings, mounts, channel } = warm?.run ?? (yield* prepareRun({
    worker: req.worker,
    channel: req.channel,
    limits: { idleSecs: req.limits?.idleSecs, sessionCeilingMin: req.limits?.ceilingMin },
    kind: "session"
  }))
  // From here the warm box's folder is this session's: its record goes there, whether or not the box is reached.
  if (warm) yield* Ref.set(warm.claimed, true)

  const outcome = yield* Effect.gen(function*() {
    const { context: start, record, runContext, chatChannel } = yield* startRun({
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
      org,
      system: warm?.run.system
    })
    const note = req.onNote ?? ((t: string) => Effect.logInfo(`session ${runId}: ${t}`))
    const inputs = yield* Queue.unbounded<RunnerInput>()
    const onLine = (line: string) => inputs.offer({ _tag: "line", line })
    const box = warm ? yield* claimWarm(warm, { record, taskId: null, chatChannel, ceiling, ceilingMin: null, onLine }) : yield* openBox({
      record, kind: "session", taskId: null, ceilingMin: null, ceiling, mode: "rpc", org, settings, mounts, channel, chatChannel,
      piArgs: ["--session-id", start.cache.route_key, "--append-system-prompt", start.system_prompt],
      chatSend: req.surface === "chat-session" ? req.chat?.provider : undefined,
      termSend: req.surface === "term-session" || req.surface === "web-session",
      onLine
    })
    const reader = yield* feedInputs(req, runId, box.stdoutEnded, inputs, note)
    if (req.onReady) yield* req.onReady(runId)

    const turns = yield* makeSessionTurns({
      req, runId, channel, org, deadline: box.plan.deadline, record, runContext, startPreamble: start.start_preamble, inputs, note,
      send: (command) => box.write(`${JSON.stringify(command)}\n`)
    })
    const reason = yield* turns.serve
    const state = turns.state()
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
    const failedPreflight = preflightError(yield* box.preflight, box.plan.network)
    if (failedPreflight) yield* note(failedPreflight)
    yield* record.settle({
      endedBy: reason,
      exitCode: clean ? 0 : null,
      ...(clean ? {} : {
        error: failedPreflight ?? (reason === "box-died" ? "the session box exited before completing the turn" : `ended by ${reason} mid-turn`)
      })
    })
    return { runId, runDir: record.runDir, reason, clean, turns: state.turns, unserved, ceilingMin: org.box.session_ceiling_min } satisfies SessionOutcome
  }).pipe(Effect.scoped)
  // The gateway may have stopped the session (a spend budget): its record, finished now, says why.
  const stopped = (yield* (yield* RunLog).read(req.worker, runId))?.stopped
  return stopped ? { ...outcome, stopped: { by: stopped.by, detail: stopped.detail } } satisfies SessionOutcome : outcome
})
