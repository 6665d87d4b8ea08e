import { Cause, Effect, Exit, Mailbox, Option, Queue } from "effect"
import { type TalkCallbacks, talkLineTo, talkViaDaemon } from "../api/talkClient.js"
import * as crypto from "node:crypto"
import { Runner } from "../runner/Runner.js"
import type { SessionMessage } from "../session/turnContext.js"
import { html } from "./html.js"
import { readTextDelta } from "../contract/piEvents.js"
import { type EventSink, eventStream } from "./respond.js"

interface Said {
  readonly who: string
  readonly text: string
  readonly kind: "you" | "worker" | "message" | "note"
}

/** One conversation of the Talk page: a warm session, what was said, and the pages watching it. */
export interface Conversation {
  readonly id: string
  readonly worker: string
  readonly inbox: Mailbox.Mailbox<SessionMessage>
  readonly controls: Queue.Queue<"abort">
  readonly said: Array<Said>
  readonly pages: Set<EventSink>
  state: "starting" | "ready" | "busy" | "ended"
  runId: string | null
  ended: string | null
  turns: number
}

/** The conversation as the page shows it (escaped): re-sent whole on each change, so a late page catches up. */
export const conversationFragment = (c: Conversation) =>
  html`<p role="status">Conversation with ${c.worker}: <strong>${c.state === "ended" ? `ended (${c.ended ?? "?"})` : c.state}</strong>${
    c.runId ? html` — run <a href="/runs/${c.runId}">${c.runId}</a>` : ""
  }</p>
<ol class="talk-log">${c.said.map((s) => html`<li class="${s.kind}"><strong>${s.who}:</strong><pre>${s.text}</pre></li>`)}</ol>`

const send = (c: Conversation, event: string, data: unknown) => {
  const line = `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`
  for (const page of c.pages) page.push(line)
}

const changed = (c: Conversation) => send(c, "log", { html: conversationFragment(c).text, state: c.state })

/** A conversation's session: the runner's callbacks tell the watching pages; however it ends, they hear it ended. */
const sessionOf = (c: Conversation) => {
  const worker = c.worker
  const note = (text: string, kind: Said["kind"] = "note", who = "roster") =>
    Effect.sync(() => {
      c.said.push({ who, text, kind })
      changed(c)
    })
  const shown: TalkCallbacks = {
    onReady: (runId) => Effect.sync(() => {
      c.runId = runId
      c.state = "ready"
      changed(c)
    }),
    onReply: (text) => note(text, "worker", worker),
    onMessage: (text) => note(text, "message", `${worker} (message)`),
    onSend: (text) => note(text, "worker", worker),
    onEvent: (line) => Effect.sync(() => {
      const delta = readTextDelta(line)
      if (delta !== undefined) send(c, "delta", { text: delta })
    }),
    onTurnEnd: (turn) => Effect.sync(() => {
      c.turns = turn
      c.state = "ready"
      changed(c)
    }),
    onNote: (text) => note(text)
  }
  // Through the running daemon when there is one (its worker's warm box is there), else in this process.
  const session = Effect.gen(function*() {
    const said: Array<string> = []
    const handed = yield* talkViaDaemon({ worker, channel: null, json: true, surface: "web-session" }, {
      inbox: c.inbox,
      controls: c.controls,
      on: talkLineTo(shown, () => Effect.void, (text) => Effect.sync(() => void said.push(text)))
    })
    if (Option.isNone(handed)) {
      const o = yield* (yield* Runner).session({ worker, inbox: c.inbox, controls: c.controls, surface: "web-session", ...shown })
      return { runId: o.runId, reason: o.reason }
    }
    const end = yield* handed.value.ended
    if (end._tag === "ended") return { runId: end.runId, reason: end.reason }
    // What the daemon said of it, as the CLI would have printed it.
    const why = said.join("").trim().replace(/^roster: /, "")
    return yield* Effect.fail({ message: why === "" ? `the daemon could not run it (exit ${end.code})` : why })
  }).pipe(Effect.scoped)
  return session.pipe(
    Effect.tap((o) => Effect.sync(() => {
      c.runId = o.runId
      c.ended = o.reason
    })),
    Effect.catchAll((e) => note(`the session could not go on: ${e.message}`).pipe(Effect.tap(() => Effect.sync(() => (c.ended = "error"))))),
    // A defect (a bug) is logged and said on the page, not lost with the web server's fiber.
    Effect.catchAllCause((cause) =>
      Cause.isInterruptedOnly(cause) ? Effect.void : Effect.logError(`web: the Talk session with ${worker} failed unexpectedly`, cause).pipe(
        Effect.zipRight(note("the session failed unexpectedly (the web server's log says why)")),
        Effect.tap(() => Effect.sync(() => (c.ended = "error")))
      )
    ),
    Effect.ensuring(Effect.sync(() => {
      c.state = "ended"
      changed(c)
      for (const page of c.pages) page.end()
      c.pages.clear()
    }))
  )
}

/**
 * The Talk page's conversations: each one the same session runner `roster talk` uses (turns one
 * at a time, abort, end, the ceilings), run in the web server's scope; what each says is pushed
 * to the pages watching it, the reply's text as it streams.
 */
export const makeConversations = () => {
  const all = new Map<string, Conversation>()

  const start = (worker: string) =>
    Effect.gen(function*() {
      const c: Conversation = {
        id: crypto.randomBytes(8).toString("hex"),
        worker,
        inbox: yield* Mailbox.make<SessionMessage>(),
        controls: yield* Queue.unbounded<"abort">(),
        said: [],
        pages: new Set(),
        state: "starting",
        runId: null,
        ended: null,
        turns: 0
      }
      all.set(c.id, c)
      return { c, session: sessionOf(c) }
    })

  return {
    start,
    get: (id: string) => all.get(id),
    list: () => [...all.values()],
    say: (c: Conversation, text: string, author: string) =>
      Effect.sync(() => {
        if (c.state === "ended") return false
        c.said.push({ who: author, text, kind: "you" })
        c.state = "busy"
        changed(c)
        return c.inbox.unsafeOffer({ text, author, provider: "web", messageId: String(c.said.filter((x) => x.kind === "you").length) })
      }),
    abort: (c: Conversation) => Effect.sync(() => void (c.state === "busy" && c.controls.unsafeOffer("abort"))),
    end: (c: Conversation) => Effect.sync(() => void c.inbox.unsafeDone(Exit.void)),
    watch: (c: Conversation) =>
      eventStream((page) => {
        page.push(`event: log\ndata: ${JSON.stringify({ html: conversationFragment(c).text, state: c.state })}\n\n`)
        if (c.state === "ended") {
          page.end()
          return () => undefined
        }
        c.pages.add(page)
        return () => c.pages.delete(page)
      })
  }
}
export type Conversations = ReturnType<typeof makeConversations>
