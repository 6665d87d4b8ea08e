// roster box extension: set_tasks — queue follow-up tasks for this worker, run later by the
// roster daemon in boxes of their own. It goes to roster's gateway, authenticated by the run's
// own token; the gateway takes the worker, run and task from the token, never from this request,
// and refuses more than [supervisor] max_self_tasks waiting at once. Loaded by run-pi with -e.
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent"
import { Type } from "typebox"
import { postAction } from "./lib/gateway.ts"

export default function (pi: ExtensionAPI) {
  pi.registerTool({
    name: "set_tasks",
    label: "Queue follow-up tasks",
    description:
      "Queue follow-up tasks for yourself: each runs later, unattended, in a fresh box of its own with the prompt you give " +
      "(write it so it stands alone: the later run does not see this conversation; leave notes in your store). " +
      "Your queue is at $ROSTER_TASKS_FILE. Only for yourself, and only a few may wait at once.",
    parameters: Type.Object({
      tasks: Type.Array(Type.Object({
        prompt: Type.String({ description: "what the later run should do, self-contained" }),
        ceiling_min: Type.Optional(Type.Number({ description: "minutes before that run's box is stopped" })),
        after: Type.Optional(Type.String({ description: "a task id of yours that must be done first" }))
      }), { description: "the tasks to queue, in order" })
    }),
    async execute(_toolCallId, params, signal) {
      const answer = await postAction("set_tasks", { tasks: params.tasks }, signal)
      const queued = (JSON.parse(answer) as { queued?: Array<string> }).queued ?? []
      return { content: [{ type: "text", text: queued.length === 0 ? "nothing queued" : `queued: ${queued.join(", ")}` }], details: {} }
    }
  })
}
