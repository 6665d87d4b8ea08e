// roster box extension: run_env — a warm box is started before any run takes it, so what only its
// run knows (its ROSTER_RUN_ID; ROSTER_TASK_ID for a queued task; its gated repos' branch, and their
// base when their canonical repo moved since the box was made) cannot be in the box's environment. The run that
// takes it writes those variables to /pihome/.roster-run-env.json before its first prompt; each
// agent start puts them in pi's own environment, which the bash tool's commands inherit. Only the
// names below: the file never changes the proxy or anything else pi was started with. A cold box
// has no such file and its variables are in its environment from the start. Loaded by run-pi with -e.
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent"
import { readFileSync } from "node:fs"

const FILE = "/pihome/.roster-run-env.json"
const NAMES = [
  "ROSTER_RUN_ID",
  "ROSTER_TASK_ID",
  "ROSTER_REPOS_JSON",
  "ROSTER_KNOWLEDGE_DIR",
  "ROSTER_KNOWLEDGE_BASE",
  "ROSTER_KNOWLEDGE_MODE",
  "ROSTER_KNOWLEDGE_BRANCH"
]

const readRunEnv = (): Record<string, unknown> | undefined => {
  try {
    const parsed: unknown = JSON.parse(readFileSync(FILE, "utf8"))
    return typeof parsed === "object" && parsed !== null ? (parsed as Record<string, unknown>) : undefined
  } catch {
    return undefined
  }
}

export default function (pi: ExtensionAPI) {
  pi.on("before_agent_start", () => {
    const env = readRunEnv()
    if (env === undefined) return
    for (const name of NAMES) {
      const value = env[name]
      if (typeof value === "string" && value.length <= 65_536 && !value.includes("\0")) process.env[name] = value
    }
  })
}
