import { FileSystem, Path } from "@effect/platform"
import { Effect, Schema } from "effect"
import { Paths, layout } from "../config/Paths.js"
import { InboxLine } from "../contract/inbox.js"
import type { SessionMessage } from "./turnContext.js"

const decode = Schema.decodeUnknownOption(Schema.parseJson(InboxLine))

/** Whether a file of the inbox folder is one of this session's: <run-id>.jsonl, or a fleet node's <run-id>.<node>.jsonl. */
const isInboxOf = (runId: string) => (name: string) => name.startsWith(`${runId}.`) && name.endsWith(".jsonl")

/**
 * Watches the session's inbox (`inbox/<run-id>.jsonl`, host-side; in a fleet one file per
 * delivering node) for messages from outside it — a task's answer sent here with reply_to
 * talk:<run-id> — and hands each one on once, as a message of its own role. Each file is read
 * from where it last stopped; a torn last line waits for its end.
 */
export const watchInbox = (runId: string, deliver: (m: SessionMessage) => Effect.Effect<void>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const dir = layout(yield* Paths).inboxDir
    const seen = new Set<string>()
    const offsets = new Map<string, number>()
    const lookAt = (file: string) =>
      Effect.gen(function*() {
        // Read again in 500 ms: a file that cannot be read now loses nothing (its offset does not move).
        const text = yield* fs.readFileString(file).pipe(Effect.orElseSucceed(() => ""))
        const offset = offsets.get(file) ?? 0
        const complete = text.lastIndexOf("\n") + 1
        if (complete <= offset) return
        offsets.set(file, complete)
        for (const l of text.slice(offset, complete).split("\n")) {
          const m = decode(l)
          if (m._tag === "None" || seen.has(m.value.id)) continue
          seen.add(m.value.id)
          yield* deliver({ text: m.value.text, author: `task ${m.value.from_task} (${m.value.worker}, ${m.value.status})`, provider: "roster", messageId: m.value.id, role: "task-reply" })
        }
      })
    const look = fs.readDirectory(dir).pipe(
      // No inbox folder yet is no replies; one unreadable is looked at again in 500 ms, nothing taken from it.
      Effect.orElseSucceed((): Array<string> => []),
      Effect.flatMap((names) => Effect.forEach(names.filter(isInboxOf(runId)).sort(), (n) => lookAt(path.join(dir, n)), { discard: true }))
    )
    return yield* look.pipe(Effect.zipRight(Effect.sleep("500 millis")), Effect.forever)
  })
