// roster box extension: knowledge_push — land this run's branch of a gated repo on the canonical
// repository's default branch. roster's host does it, after its own checks: a fast-forward only,
// no change to a protected path, under a size cap. Whatever is not landed stays on the run's
// branch and is parked in quarantine when the run ends, never merged. Loaded by run-pi with -e.
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent"
import { Type } from "typebox"
import { postAction } from "./lib/gateway.ts"

export default function (pi: ExtensionAPI) {
  pi.registerTool({
    name: "knowledge_push",
    label: "Land your branch of a gated repo",
    description:
      "Land the commits on this run's branch of a gated repo (see $ROSTER_REPOS_JSON) on the canonical default branch. " +
      "Commit first: only committed work on your branch is pushed. It lands a fast-forward only: if the default branch moved, " +
      "fetch origin and rebase, then push again. Protected paths may not change.",
    parameters: Type.Object({
      connection: Type.Optional(Type.String({ description: "which gated repo (its name under /pihome/mnt); optional when the run has one" }))
    }),
    async execute(_toolCallId, params, signal) {
      const answer = JSON.parse(await postAction("knowledge_push", params, signal)) as { head?: string; landed_ref?: string; already?: boolean }
      const text = answer.already ? `already landed: ${answer.landed_ref} is at ${answer.head}` : `landed: ${answer.landed_ref} is now ${answer.head}`
      return { content: [{ type: "text", text }], details: {} }
    }
  })
}
