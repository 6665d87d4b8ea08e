/** Fixed facts of the box, shared by the provisioner, the gateway and the tests. */
/** What roster versions before per-deployment lockdown named the shared network and chain (`roster doctor --fix` removes them). */
export const LEGACY_NETWORK = "roster-locked"
export const LEGACY_CHAIN = "ROSTER-LOCKED"
export const SENTINEL = "roster-sentinel-no-real-credential-in-box"
export const LLM_PROVIDERS = ["anthropic", "openai-codex"] as const

export const LABEL_RUN_ID = "roster.run-id"
export const LABEL_WORKER = "roster.worker"
export const LABEL_KIND = "roster.kind"
/** The config root of the deployment a box belongs to: a daemon adopts and reaps only its own. */
export const LABEL_DEPLOYMENT = "roster.deployment"
/** When the box's ceiling passes (ms since the epoch): a box found alive after it is killed. */
export const LABEL_DEADLINE = "roster.deadline"
/** The process that owns the box (a CLI run or session, or the daemon for a task): pid and start time. */
export const LABEL_OWNER_PID = "roster.owner-pid"
export const LABEL_OWNER_START = "roster.owner-start"
export const LABEL_TASK_ID = "roster.task-id"

// Writable run storage binds at fixed container paths, never at the host path, so nothing in
// the box (pwd, $HOME, a stack trace) reveals the host layout or can name a host path to plant
// a file at. Read-only mounts sit under the same home for one legible tree.
export const PIHOME = "/pihome"
export const WORKSPACE = "/pihome/workspace"
export const SESSION = "/pihome/session"
export const AGENT_DIR = "/pihome/agent"
export const STORE = "/pihome/store"
export const MNT = "/pihome/mnt"
export const SELF = "/pihome/self"
export const CHANNEL = "/pihome/channel"
/** What people sent the run (a chat message's files), written host-side, read-only in the box. */
export const INBOX = "/pihome/inbox"
export const TASKS_FILE = "/pihome/self/schedule.json"
/**
 * The run's own variables for a warm box, which was started before its run was known (the box's
 * run_env extension puts them in pi's environment at each agent start): its name in /pihome.
 */
export const RUN_ENV_NAME = ".roster-run-env.json"
export const BOX_CA = "/opt/roster/ca.crt"
export const BOX_CA_BUNDLE = "/opt/roster/ca-bundle.crt"
export const BAKED_RUN_PI = "/opt/roster/engine/run-pi"
/** Where a dev checkout (`[engine] dir`) is mounted read-only. */
export const MOUNTED_ENGINE = "/opt/roster/checkout"

/** When the host user is root the box still must not be: it runs as this unprivileged id. */
export const BOX_FALLBACK_UID = 65532
