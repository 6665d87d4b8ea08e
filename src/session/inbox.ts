import { FileSystem } from "@effect/platform"
import { Effect, Schema } from "effect"
import { Paths, layout } from "../config/Paths.js"
import { InboxLine } from "../contract/inbox.js"
import type { SessionMessage } from "./turnContext.js"

const decode = Schema.decodeUnknownOption(Schema.parseJson(InboxLine))

/**
 * Watches the session's inbox (`data/inbox/<run-id>.jsonl`, host-side) for messages from outside
 * it — a task's answer sent here with reply_to talk:<run-id> — and hands each one on once, as a
 * message of its own role. Read from where it last stopped; a torn last line waits for its end.
 */
export const watchInbox = (runId: string, deliver: (m: SessionMessage) => Effect.Effect<void>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const file = layout(yield* Paths).inboxFile(runId)
    const seen = new Set<string>()
    let offset = 0
    const look = Effect.gen(function*() {
      const text = yield* fs.readFileString(file).pipe(Effect.orElseSucceed(() => ""))
      const complete = text.lastIndexOf("\n") + 1
      if (complete <= offset) return
      const fresh = text.slice(offset, complete)
      offset = complete
      for (const l of fresh.split("\n")) {
        const m = decode(l)
        if (m._tag === "None" || seen.has(m.value.id)) continue
        seen.add(m.value.id)
        yield* deliver({ text: m.value.text, author: `task ${m.value.from_task} (${m.value.worker}, ${m.value.status})`, provider: "roster", messageId: m.value.id, role: "task-reply" })
      }
    })
    return yield* look.pipe(Effect.zipRight(Effect.sleep("500 millis")), Effect.forever)
  })
