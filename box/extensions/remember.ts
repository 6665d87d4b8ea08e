// roster box extension: remember — keep a note in this worker's memory, which roster briefs to
// the worker at the start of its later runs (host-side: the box never holds the memory file).
// It goes to roster's gateway, authenticated by the run's own token; the gateway takes the
// worker and run from the token, bounds the entry, and holds a tainted run's entry for review.
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent"
import { Type } from "typebox"
import { postAction } from "./lib/gateway.ts"

export default function (pi: ExtensionAPI) {
  pi.registerTool({
    name: "remember",
    label: "Remember",
    description:
      "Keep a short note for your later runs: where something is, a decision, a fact you had to find out. " +
      "Your next runs start with what you remember (newest first). One fact per note, plain text; " +
      "scope \"channel:<name>\" keeps it with the channel this run serves instead of for you everywhere. " +
      "Answers the note's id (m-xxxxxxxx), which forget takes.",
    parameters: Type.Object({
      text: Type.String({ description: "the note, plain text, self-contained" }),
      scope: Type.Optional(Type.String({ description: "\"worker\" (default) or \"channel:<name>\" of this run's channel" }))
    }),
    async execute(_toolCallId, params, signal) {
      try {
        const answer = JSON.parse(await postAction("remember", params, signal)) as { id?: string; pending?: boolean; note?: string }
        return {
          content: [{ type: "text", text: `remembered as ${answer.id}${answer.pending ? ` (pending: ${answer.note ?? "held for review"})` : ""}` }],
          details: {}
        }
      } catch (e) {
        return { content: [{ type: "text", text: `not remembered: ${e instanceof Error ? e.message : String(e)}` }], details: {} }
      }
    }
  })
}
