// roster box extension: forget — drop a note from this worker's memory by its id (m-xxxxxxxx, as
// the briefing and remember show it). It goes to roster's gateway, authenticated by the run's own
// token: a worker can only ever forget its own notes.
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent"
import { Type } from "typebox"
import { postAction } from "./lib/gateway.ts"

export default function (pi: ExtensionAPI) {
  pi.registerTool({
    name: "forget",
    label: "Forget",
    description: "Drop a note you remembered that is wrong or no longer needed, by its id (m-xxxxxxxx, shown in your briefing).",
    parameters: Type.Object({
      id: Type.String({ description: "the note's id, m-xxxxxxxx" })
    }),
    async execute(_toolCallId, params, signal) {
      try {
        await postAction("forget", { id: params.id }, signal)
        return { content: [{ type: "text", text: `forgot ${params.id}` }], details: {} }
      } catch (e) {
        return { content: [{ type: "text", text: `not forgotten: ${e instanceof Error ? e.message : String(e)}` }], details: {} }
      }
    }
  })
}
