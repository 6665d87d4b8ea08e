import type { ChatPlace, RunOrigin, TaskOrigin } from "../contract/origin.js"
import { parseReplyTo } from "../contract/origin.js"
import { promptLine } from "../contract/promptText.js"
import type { Surface } from "../contract/runContext.js"
import { type MemoryEntry, newestFirst } from "../memory/MemoryStore.js"
import type { Interruption } from "../contract/interruption.js"

const PROVIDER = { slack: "Slack", discord: "Discord" } as const

const chatWhere = (p: { readonly provider: ChatPlace["provider"]; readonly channel: string; readonly thread?: string | null | undefined }) =>
  `${PROVIDER[p.provider]} channel ${p.channel}${p.thread ? ` (thread ${p.thread})` : ""}`

/** Who queued a task, in a clause: "a person queued it at the command line", "you queued it yourself …". */
const queuedBy = (o: TaskOrigin) => {
  switch (o.by) {
    case "person":
      return `a person queued it ${o.via === "web" ? "in roster's web page" : o.via === "api" ? "through roster's control API" : "at the command line (roster task add)"}`
    case "self":
      return `you queued it yourself with set_tasks during run ${o.run_id ?? "(unknown)"}${o.task_id ? ` (task ${o.task_id})` : ""}`
    case "chat":
      return o.chat ? `it came from a message by ${promptLine(o.chat.author)} in ${chatWhere(o.chat)}` : "it came from a chat message"
  }
}

/** The one plain sentence that says where this run happens and who asked for it. */
export const surfaceSentence = (surface: Surface, origin: RunOrigin, chat?: ChatPlace) => {
  const by = origin._tag === "queue" ? queuedBy(origin.queued_by) : origin._tag === "chat" ? `${promptLine(origin.author)} wrote to you in ${chatWhere(origin)}` : ""
  switch (surface) {
    case "direct-box":
      return origin._tag === "person" && origin.via === "embed"
        ? "This is a direct run: a program embedding roster started it, and your final answer goes back to it."
        : "This is a direct run: a person started it at the command line (roster worker run) and reads your final answer there."
    case "queued-task":
      return origin._tag === "queue"
        ? `This is queued task ${origin.task_id}, run unattended by roster's daemon; ${by}. No one watches it live: your final answer is recorded on the task.`
        : "This is a queued task, run unattended by roster's daemon; your final answer is recorded on the task."
    case "term-session":
      return "This is a conversation in a terminal (roster talk): each message is a turn; the person reads your replies as you write them."
    case "web-session":
      return "This is a conversation in roster's web page (Talk): each message is a turn; the person reads your replies there."
    case "chat-session":
      return `This is a conversation in ${chat ? chatWhere(chat) : "a chat channel"}: each message is a turn, and your answers reach it only through the send tool.`
  }
}

/** Where the answer goes when the run is a task with a reply_to. */
export const replySentence = (replyTo: string | null) => {
  if (replyTo === null) return undefined
  const t = parseReplyTo(replyTo)
  switch (t._tag) {
    case "talk":
      return `When you finish, your final answer is delivered as a message into the live conversation ${t.runId}.`
    case "task":
      return `When you finish, your final answer is delivered to task ${t.taskId}'s record, for whoever runs or reads it.`
    case "chat":
      return `When you finish, your final answer is posted to ${chatWhere(t)}.`
    case "none":
      return "Your final answer is recorded on the task and sent nowhere else."
    case "invalid":
      return undefined
  }
}

/** What a continuation resumes. */
export const continuesSentence = (continues: { readonly task_id: string | null; readonly run_id: string } | null) =>
  continues === null
    ? undefined
    : `This run continues ${continues.task_id ? `task ${continues.task_id} (run ${continues.run_id})` : `run ${continues.run_id}`}: ` +
      "the conversation before this message is that run's own, resumed. Pick up where it left off."

/** What interrupted the run this one carries on from, and when. */
export const interruptedSentence = (interrupted: Interruption | null) =>
  interrupted === null
    ? undefined
    : `Your previous run of this task (${interrupted.run_id}) was interrupted at ${interrupted.at}, not by you: ` +
      (interrupted.by === "stop"
        ? "roster's daemon was stopped"
        : interrupted.by === "cut-off"
        ? "its machine lost touch with the fleet's database and stopped its box"
        : "roster's daemon stopped with its box (a crash or a reboot)") +
      ". Check what of the work is already done before you go on; finish it, do not start it over."

/** The entries a run of `channel` is briefed with: the worker's own and that channel's, accepted ones only. */
export const briefable = (entries: ReadonlyArray<MemoryEntry>, channel: string | null) =>
  entries.filter((e) => !e.pending && (e.scope === "worker" || (channel !== null && e.scope === `channel:${channel}`)))

/**
 * The memory block of a Start briefing: newest first, within `max` characters, with a line saying
 * how many were left out. Returns the ids it carried (the run context records them).
 */
export const memoryBlock = (entries: ReadonlyArray<MemoryEntry>, max: number) => {
  const newest = newestFirst(entries)
  if (newest.length === 0) return { text: undefined, ids: [] as ReadonlyArray<string> }
  const head = "## What you remember\nNotes you saved with remember in earlier runs, newest first (forget one that is wrong with forget):"
  const lines: Array<string> = []
  let used = head.length
  for (const e of newest) {
    const line = `- [${e.id}, ${e.time.slice(0, 10)}${e.scope === "worker" ? "" : `, ${e.scope}`}] ${promptLine(e.text)}`
    if (used + line.length + 1 > max) break
    lines.push(line)
    used += line.length + 1
  }
  const tailFor = (left: number) =>
    left > 0 ? `(${left} older ${left === 1 ? "entry" : "entries"} left out: ${left === 1 ? "it did" : "they did"} not fit in the briefing's ${max} characters.)` : ""
  // The line saying what was left out fits within the bound too: make room for it.
  while (lines.length > 0 && lines.length < newest.length && used + tailFor(newest.length - lines.length).length + 1 > max) {
    used -= (lines.pop() as string).length + 1
  }
  const tail = tailFor(newest.length - lines.length)
  return { text: [head, ...lines, ...(tail ? [tail] : [])].join("\n"), ids: newest.slice(0, lines.length).map((e) => e.id) }
}
