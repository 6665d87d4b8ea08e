import type { SessionEndReason } from "../session/runSession.js"

/** What roster itself says in a chat thread (lifecycle, refusals, undelivered answers), always marked as roster's. */
export const startedNotice = (worker: string, runId: string) =>
  `[roster] ${worker} is here (session ${runId}); it answers in this thread.`

const why = (reason: SessionEndReason, idleMin: number, ceilingMin: number) => {
  switch (reason) {
    case "idle":
      return `no message for ${idleMin} min`
    case "session-ceiling":
      return `it reached the session ceiling of ${ceilingMin} min`
    case "turn-ceiling":
      return "a turn ran past the turn ceiling"
    case "box-died":
      return "its box stopped unexpectedly (see: roster runs show)"
    case "closed":
      return "the daemon is stopping"
  }
}

export const endedNotice = (
  worker: string,
  runId: string,
  reason: SessionEndReason,
  idleMin: number,
  ceilingMin: number,
  stopped?: { readonly detail: string }
) =>
  stopped
    // The gateway's own words: what was spent, which budget, and when it starts again.
    ? `[roster] ${worker}'s session ${runId} was stopped: ${stopped.detail}`
    : `[roster] ${worker}'s session ${runId} ended: ${why(reason, idleMin, ceilingMin)}. A new message starts a new one.`

export const limitedNotice = (worker: string, perMin: number) =>
  `[roster] ${worker} takes at most ${perMin} messages a minute in this channel; that one was not passed on — send it again in a minute.`

export const cutNote = (max: number) => `\n[roster: this message was cut at ${max} characters]`

/** The `unsent = "notice"` line: the worker answered in text only, so the thread sees its start and how to get the rest. */
export const unsentNotice = (worker: string, text: string) =>
  `[roster] ${worker} answered without sending it here; its first 300 characters:\n> ${text.slice(0, 300).replace(/\n/g, "\n> ")}`

export const failedNotice = (worker: string, detail: string) => `[roster] ${worker}'s session could not start: ${detail}`

/** A message the session could not take as a turn: said in its thread, so its sender knows to send it again. */
export const skippedNotice = (worker: string, why: string) => `[roster] ${worker} could not take this message (${why}): send it again`

/** Messages past what waits in one thread: the thread is told which ones will not reach the next session. */
export const droppedNotice = (worker: string, kept: number, dropped: ReadonlyArray<{ readonly author: string; readonly text: string }>) =>
  `[roster] only the latest ${kept} messages in a thread wait for ${worker}'s next session; ${dropped.length === 1 ? "this one was" : `these ${dropped.length} were`} dropped — send again what still matters:\n${
    dropped.map((d) => `> ${d.author}: ${d.text.slice(0, 120).replace(/\n/g, " ")}${d.text.length > 120 ? "…" : ""}`).join("\n")
  }`
