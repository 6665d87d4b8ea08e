import { Option, Schema } from "effect"
import { isSendTool, type PiEvent } from "../contract/piEvents.js"
import type { SessionMessage } from "./turnContext.js"

/** What roster reads of a send tool's arguments: the text it sends. */
const decodeSendArgs = Schema.decodeUnknownOption(Schema.Struct({ text: Schema.String }))

/** Why a warm session ended. */
export type SessionEndReason = "idle" | "closed" | "session-ceiling" | "turn-ceiling" | "box-died"

/** Where the session stands between two inputs. Pure data: the runner owns time and I/O. */
export interface TurnState {
  readonly busy: boolean
  readonly pending: ReadonlyArray<SessionMessage>
  readonly inboxOpen: boolean
  readonly turns: number
  /** After a turn ends on agent_end, pi still settles that run: its agent_settled must not end the next turn. */
  readonly staleSettle: boolean
  readonly sawStart: boolean
  /** Chat surfaces: assistant text of this turn that no send tool carried out. */
  readonly dropped: string
  /** A send tool's post was taken by the gateway this turn (its tool ended without error). */
  readonly sent: boolean
  /** This turn did not finish its work: pi stopped it on an error or an abort, or refused the prompt. */
  readonly failed: boolean
}

export const initialTurnState: TurnState = {
  busy: false, pending: [], inboxOpen: true, turns: 0, staleSettle: false, sawStart: false, dropped: "", sent: false, failed: false
}

export type TurnInput =
  | { readonly _tag: "msg"; readonly message: SessionMessage }
  | { readonly _tag: "closed" }
  | { readonly _tag: "event"; readonly event: PiEvent }
  | { readonly _tag: "died" }
  | { readonly _tag: "abort" }
  /** The runner wrote the next pending message to pi as a prompt. */
  | { readonly _tag: "prompted" }
  /** The next pending message could not be prepared; it is dropped. */
  | { readonly _tag: "skipped" }

export type TurnOutput =
  | { readonly _tag: "reply"; readonly text: string }
  | { readonly _tag: "message"; readonly text: string }
  /** The worker's explicit word to the person at the terminal (term_send): shown at once, between turns. */
  | { readonly _tag: "send"; readonly text: string }
  | { readonly _tag: "abort" }
  /** A turn ended: whether a send of it was taken, and whether it failed (a chat message's mark says which). */
  | { readonly _tag: "turn-end"; readonly turn: number; readonly sent: boolean; readonly failed: boolean }
  | { readonly _tag: "note"; readonly text: string }
  /** A chat turn's answer that no send tool carried: the runner handles it as `[[chat]] unsent` says. */
  | { readonly _tag: "unsent"; readonly turn: number; readonly text: string }
  | { readonly _tag: "end"; readonly reason: SessionEndReason }

/** The session surfaces; only a chat session's replies must leave through a send tool. */
export type Surface = "term-session" | "web-session" | "chat-session"

/** The message to prompt next, if pi is free for one. */
export const nextMessage = (s: TurnState): SessionMessage | undefined => (s.busy ? undefined : s.pending[0])

/** Nothing in flight, nothing waiting, and no more coming: the session is done. */
export const isDrained = (s: TurnState) => !s.inboxOpen && !s.busy && s.pending.length === 0

const endTurn = (s: TurnState, surface: Surface): [TurnState, Array<TurnOutput>] => {
  const out: Array<TurnOutput> = []
  if (surface === "chat-session" && s.dropped.length > 0 && !s.sent) {
    out.push({ _tag: "note", text: `turn ${s.turns} ended with assistant text (${s.dropped.length} chars) but no send action — not delivered to the channel` })
    out.push({ _tag: "unsent", turn: s.turns, text: s.dropped })
  }
  out.push({ _tag: "turn-end", turn: s.turns, sent: s.sent, failed: s.failed })
  return [{ ...s, busy: false, dropped: "", sent: false, failed: false }, out]
}

const onEvent = (s: TurnState, e: PiEvent, surface: Surface): [TurnState, Array<TurnOutput>] => {
  switch (e.kind) {
    case "assistant": {
      const t = e.stopReason === "error" || e.stopReason === "aborted" ? { ...s, failed: true } : s
      if (e.text.trim() === "") return [t, []]
      return surface === "chat-session" ? [{ ...t, dropped: t.dropped === "" ? e.text : `${t.dropped}\n\n${e.text}` }, []] : [t, [{ _tag: "reply", text: e.text }]]
    }
    case "tool-start": {
      if (!isSendTool(e.name)) return [s, []]
      const text = Option.getOrUndefined(decodeSendArgs(e.args))?.text
      if (typeof text !== "string") return [s, []]
      return [s, e.name === "message_user" ? [{ _tag: "message", text }] : e.name === "term_send" ? [{ _tag: "send", text }] : []]
    }
    case "tool-end":
      // A send counts once the gateway took it: a refused or failed post leaves the turn's text
      // undelivered, and the "answered without sending" notice still tells the channel so.
      return isSendTool(e.name) && !e.isError ? [{ ...s, sent: true }, []] : [s, []]
    case "agent-start":
      return [{ ...s, sawStart: true, staleSettle: false }, []]
    case "turn-end":
      return s.busy ? endTurn({ ...s, staleSettle: true }, surface) : [s, []]
    case "settled":
      return s.busy && !(s.staleSettle && !s.sawStart) ? endTurn(s, surface) : [s, []]
    case "prompt-refused": {
      if (!s.busy) return [s, []]
      const [next, out] = endTurn({ ...s, failed: true }, surface)
      return [next, [{ _tag: "note", text: `pi refused the message: ${e.error}` }, ...out]]
    }
    default:
      return [s, []]
  }
}

/**
 * The turn state machine of a warm session (seed run_session): one prompt at a time, a turn
 * ends at agent_settled or agent_end without retry, a stale settle is not taken for the next
 * turn, the inbox closing with nothing in flight ends the session.
 */
export const step = (s: TurnState, input: TurnInput, surface: Surface): [TurnState, Array<TurnOutput>] => {
  const [next, out] = ((): [TurnState, Array<TurnOutput>] => {
    switch (input._tag) {
      case "msg":
        return [{ ...s, pending: [...s.pending, input.message] }, []]
      case "closed":
        return [{ ...s, inboxOpen: false }, []]
      case "died":
        return [s, [{ _tag: "end", reason: "box-died" }]]
      case "abort":
        return [s, s.busy ? [{ _tag: "abort" }] : []]
      case "prompted":
        return [{ ...s, pending: s.pending.slice(1), busy: true, sawStart: false, turns: s.turns + 1 }, []]
      case "skipped":
        return [{ ...s, pending: s.pending.slice(1) }, []]
      case "event":
        return onEvent(s, input.event, surface)
    }
  })()
  return isDrained(next) && !out.some((o) => o._tag === "end") ? [next, [...out, { _tag: "end", reason: "closed" }]] : [next, out]
}
