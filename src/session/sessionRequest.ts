import type { Effect, Mailbox, Queue } from "effect"
import type { ChatPlace, RunOrigin } from "../contract/origin.js"
import type { SessionMessage } from "./turnContext.js"
import type { FetchFile } from "./messageFiles.js"
import type { SessionEndReason, Surface } from "./turns.js"

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
  /** What the worker says to the person at the terminal with term_send (a talk session's), as pi calls it. */
  readonly onSend?: (text: string) => Effect.Effect<void>
  readonly onEvent?: (line: string) => Effect.Effect<void>
  /** A message became a turn: pi has it. */
  readonly onTurnStart?: (message: SessionMessage) => Effect.Effect<void>
  /** A turn ended (or the session ended under it): what became of it, and the message it served. */
  readonly onTurnEnd?: (turn: number, end: TurnEnd) => Effect.Effect<void>
  readonly onNote?: (text: string) => Effect.Effect<void>
  /**
   * A message that could not become a turn (its context not saved, its trace not written, blank): said
   * where its sender is (a chat thread), as well as in `onNote`.
   */
  readonly onSkipped?: (message: SessionMessage, why: string) => Effect.Effect<void>
  /** The box is up and the first message can be taken. */
  readonly onReady?: (runId: string) => Effect.Effect<void>
  /** The channel the session serves: its history mounted, each turn and reply appended to it, its recent past on the first turn. */
  readonly channel?: string | null
  /** Who opened the session (default: a person at the CLI; the web's Talk page says web). */
  readonly origin?: RunOrigin
  /** A chat session's service and channel. */
  readonly chat?: ChatPlace
  /** A chat turn that answered without the send tool: what was done with its text (`[[chat]] unsent`). */
  readonly onUnsent?: (turn: number, text: string, message: SessionMessage | undefined) => Effect.Effect<UnsentOutcome>
  /** How a message's files are fetched into the run's inbox (a chat session's: host-side, with its service's token), and how big each may be. */
  readonly files?: { readonly fetch: FetchFile; readonly maxBytes: number }
  /** This session's own idle timeout and whole-session ceiling (a `[[chat.channel]]`'s), over `[box]`'s. */
  readonly limits?: { readonly idleSecs?: number | undefined; readonly ceilingMin?: number | undefined }
}

/** How a turn ended: whether something of it reached its person, and whether it finished its work. */
export interface TurnEnd {
  /** A send was taken (or, for a chat turn that answered without one, its text posted as `[[chat]] unsent = "post"`). */
  readonly delivered: boolean
  /** pi stopped it on an error or an abort, refused its prompt, or the session ended under it. */
  readonly failed: boolean
  readonly message: SessionMessage | undefined
}

/** How a warm session ended: its run, why, whether cleanly, and how many turns it served. */
export interface SessionOutcome {
  readonly runId: string
  readonly runDir: string
  readonly reason: SessionEndReason
  readonly clean: boolean
  readonly turns: number
  /** The whole-session ceiling it ran under (minutes): its own limit, or `[box] session_ceiling_min` of its snapshot. */
  readonly ceilingMin: number
  /** Messages taken from the inbox that no turn served (the session ended first): its caller may serve them elsewhere. */
  readonly unserved: ReadonlyArray<SessionMessage>
  /** Why the gateway stopped it, when it did (a spend budget): its words, for whoever the session served. */
  readonly stopped?: { readonly by: string; readonly detail: string } | undefined
}


/** How a chat turn's unsent answer was handled (`[[chat]] unsent`), and whether the post it called for went out. */
export interface UnsentOutcome {
  readonly handled: "notice" | "post" | "drop"
  readonly posted: boolean
}
