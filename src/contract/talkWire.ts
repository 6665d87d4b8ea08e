import { Schema } from "effect"

/**
 * A talk handed to the running daemon (src/daemon/directTalks.ts) by `roster talk` or `roster web`:
 * the session runs there, where its worker's warm box is, and the asker keeps its person. The CLI asks once and reads
 * the session's lines as they come; what the person types goes as inputs beside it.
 */
export const TalkAsk = Schema.Struct({
  /** The client's build: a daemon of another build says no, and the CLI runs the session itself. */
  build: Schema.String,
  /** Names the session for its inputs. */
  token: Schema.String.pipe(Schema.minLength(16)),
  worker: Schema.String,
  channel: Schema.NullOr(Schema.String),
  /** pi's raw events are wanted (`--json`; the web's Talk streams the reply's text from them). */
  json: Schema.Boolean,
  /** Where the person is: a terminal (`roster talk`, the default) or the web's Talk page. */
  surface: Schema.optional(Schema.Literal("term-session", "web-session")),
  /** The CLI's environment where it decides what the session reaches: another engine, home or config root, and the CLI runs it itself. */
  docker_host: Schema.NullOr(Schema.String),
  home: Schema.String,
  config: Schema.String
})
export type TalkAsk = typeof TalkAsk.Type

/** What the person did: a line typed, Ctrl-C during a turn (abort), Ctrl-D (end), a second Ctrl-C (quit: the session ends now). */
export const TalkInput = Schema.Struct({
  token: Schema.String,
  kind: Schema.Literal("say", "abort", "end", "quit"),
  text: Schema.optional(Schema.String),
  author: Schema.optional(Schema.String),
  id: Schema.optional(Schema.String)
})
export type TalkInput = typeof TalkInput.Type

const text = { text: Schema.String }

/**
 * One line of the answer, in order: the head (the session is the daemon's now), the session's
 * callbacks as they fire, text for the CLI's stdout (`out`) and stderr (`err`), and last how it ended (`ended`) or the
 * exit code of a session that could not run (`failed`).
 */
export const TalkLine = Schema.Union(
  Schema.Struct({ kind: Schema.Literal("head") }),
  Schema.Struct({ kind: Schema.Literal("ready"), run_id: Schema.String }),
  Schema.Struct({ kind: Schema.Literal("reply"), ...text }),
  Schema.Struct({ kind: Schema.Literal("message"), ...text }),
  Schema.Struct({ kind: Schema.Literal("send"), ...text }),
  Schema.Struct({ kind: Schema.Literal("event"), ...text }),
  Schema.Struct({ kind: Schema.Literal("note"), ...text }),
  Schema.Struct({ kind: Schema.Literal("out"), ...text }),
  Schema.Struct({ kind: Schema.Literal("err"), ...text }),
  Schema.Struct({ kind: Schema.Literal("turn_end"), turn: Schema.Number }),
  Schema.Struct({
    kind: Schema.Literal("ended"),
    run_id: Schema.String,
    turns: Schema.Number,
    reason: Schema.String,
    clean: Schema.Boolean
  }),
  Schema.Struct({ kind: Schema.Literal("failed"), code: Schema.Number })
)
export type TalkLine = typeof TalkLine.Type
