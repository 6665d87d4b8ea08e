import { Schema } from "effect"
import { isIP } from "node:net"
import { CeilingMinutes, Span } from "./ceiling.js"
import { ClusterSection } from "./cluster.js"
import { RequestRule, RULE_ACTIONS, rulesProblem } from "./requestRule.js"

const Port = Schema.Int.pipe(Schema.between(1, 65535))
// Ceilings by the one rule every surface uses; waits for a box or a message up to a week.
const Minutes = CeilingMinutes
const IdleMinutes = Span("minutes", 7 * 24 * 60, "7 days")
const Scope = Schema.Array(Schema.String.pipe(Schema.pattern(/^org(\/(\*|[a-z][a-z0-9-]{0,31}))?$/, {
  message: () => `a scope entry is "org", "org/*" or "org/<worker>"`
})))
const Host = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9.*:[\]-]+$/, {
  message: () => "a host is a bare name or address, without scheme, path or port"
}))

export const EngineSection = Schema.Struct({
  image: Schema.optionalWith(Schema.NonEmptyString, { default: () => "roster-box:1" }),
  dir: Schema.optional(Schema.NonEmptyString)
})

const Size = (what: string) =>
  Schema.String.pipe(Schema.pattern(/^\d+(\.\d+)?[bkmg]?$/i, { message: () => `${what} is a size such as "4g" or "512m"` }))

const UNITS: Record<string, number> = { b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }

/** "4g" -> bytes, as docker's --memory reads it. */
export const parseSize = (text: string): number => {
  const m = /^(\d+(?:\.\d+)?)([bkmg]?)$/i.exec(text.trim())
  if (!m) return Number.NaN
  return Math.floor(Number(m[1]) * (UNITS[(m[2] || "b").toLowerCase()] ?? 1))
}

const BoxFields = Schema.Struct({
  pids_limit: Schema.optionalWith(Schema.Int.pipe(Schema.nonNegative()), { default: () => 512 }),
  /** A box's RAM ("0" lifts the limit: never the default — a runaway agent must not take the host down). */
  memory: Schema.optionalWith(Size("memory"), { default: () => "4g" }),
  /** Cores; unset means half the host's. */
  cpus: Schema.optional(Schema.String.pipe(Schema.pattern(/^\d+(\.\d+)?$/, {
    message: () => `cpus is a number of cores such as "2" or "1.5"`
  }))),
  egress_lockdown: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  /**
   * The kernel a box's syscalls reach: gVisor's (runsc, a user-space kernel) or the host's (runc).
   * auto: runsc when the engine has it registered, else runc with a daily note saying how to add it.
   */
  runtime: Schema.optionalWith(Schema.Literal("auto", "runsc", "runc"), { default: () => "auto" as const }),
  ceiling_min: Schema.optionalWith(Minutes, { default: () => 30 }),
  session_ceiling_min: Schema.optionalWith(Minutes, { default: () => 240 }),
  turn_ceiling_min: Schema.optionalWith(Minutes, { default: () => 30 }),
  idle_secs: Schema.optionalWith(Span("seconds", 7 * 86_400, "7 days"), { default: () => 600 }),
  tmp_size: Schema.optionalWith(Size("tmp_size"), { default: () => "1g" }),
  /** stdout.jsonl (and stderr.log) stop here, with a marker line: a box cannot fill the disk through roster. */
  transcript_max: Schema.optionalWith(Size("transcript_max"), { default: () => "256m" }),
  /** The most characters a worker's identity.md may hold (it is the head of every run's system prompt). */
  identity_max: Schema.optionalWith(Schema.Int.pipe(Schema.between(100, 1_000_000)), { default: () => 64_000 }),
  /** The longest line roster holds to show or read (longer ones are cut with a visible mark). */
  line_max: Schema.optionalWith(Size("line_max"), { default: () => "1m" }),
  /**
   * host:port a box's preflight tries to reach directly, and must not. Unset, roster picks an address
   * that answers nowhere and is on none of this machine's networks (box/preflightProbe.ts); an address
   * that answers from this host makes the check bite.
   */
  preflight_probe: Schema.optional(Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9.-]+:\d{1,5}$/, {
    message: () => `preflight_probe is "host:port", e.g. "203.0.113.1:443"`
  }))),
  /**
   * Warm boxes: after a worker's run, the daemon makes its next box ready (started, pi waiting for its first
   * prompt, its token bound to no run) so the next run of that worker skips the engine's start and pi's load.
   */
  warm: Schema.optionalWith(Schema.Literal("recent", "off"), { default: () => "recent" as const }),
  /** Warm boxes at once on this node (each holds a started box's memory: docs/PERFORMANCE.md measures it). */
  warm_max: Schema.optionalWith(Schema.Int.pipe(Schema.between(0, 64)), { default: () => 2 }),
  /** How long a warm box waits for a run before it is recycled, in minutes. */
  warm_idle_min: Schema.optionalWith(IdleMinutes, { default: () => 30 })
})

// /tmp is a tmpfs: RAM counted against the box's memory. Bigger than the limit, a full /tmp
// is an OOM kill of the agent instead of a plain "no space left on device".
export const BoxSection = BoxFields.pipe(Schema.filter((b) => {
  const memory = parseSize(b.memory)
  return memory === 0 || parseSize(b.tmp_size) < memory || {
    path: ["tmp_size"],
    message: `tmp_size (${b.tmp_size}) must be below memory (${b.memory}): /tmp is RAM, and a full /tmp should be ` +
      `"no space left", not an out-of-memory kill — lower [box] tmp_size or raise [box] memory`
  }
}))

export const GatewaySection = Schema.Struct({
  port: Schema.optionalWith(Port, { default: () => 7300 }),
  /**
   * The addresses the gateway listens on besides loopback (always added, for the CLI); the first
   * that is not loopback is the one boxes reach it at (host.docker.internal). Default: the locked
   * network's bridge address. `roster server start --addr` overrides it for that start.
   */
  listen: Schema.optional(Schema.Array(Schema.String.pipe(Schema.filter((a) => isIP(a) !== 0 || `listen: "${a}" is not an IP address (e.g. "172.30.0.1")`)))),
  /** A PEM file of extra roots to trust for upstream TLS, on top of the system's (a test or private upstream). */
  upstream_ca_file: Schema.optional(Schema.String.pipe(Schema.filter((p) => p.startsWith("/") || "path must be absolute"))),
  /** Largest request body forwarded on a terminated connection, in MiB. */
  max_body_mib: Schema.optionalWith(Schema.Number.pipe(Schema.positive()), { default: () => 32 }),
  /**
   * "ask": a request the policy refuses is held while a person decides (roster approvals,
   * approve, deny; the web's Gateway page) instead of refused at once. Never a private or
   * metadata address, and never a credential: an approval opens a tunnel like [[allow]].
   */
  approvals: Schema.optionalWith(Schema.Literal("off", "ask"), { default: () => "off" as const }),
  /** How long a held request waits for a decision before it gets its 403. */
  approval_wait_s: Schema.optionalWith(Schema.Number.pipe(Schema.positive(), Schema.lessThanOrEqualTo(3600)), { default: () => 120 }),
  /** The most requests one run may have held at once (each is an open connection); past it a request is refused at once. */
  approvals_max_per_run: Schema.optionalWith(Schema.Int.pipe(Schema.positive(), Schema.lessThanOrEqualTo(1000)), { default: () => 8 }),
  /** The most requests held at once on this node, every run's together. */
  approvals_max: Schema.optionalWith(Schema.Int.pipe(Schema.positive(), Schema.lessThanOrEqualTo(10_000)), { default: () => 64 })
})

export const SupervisorSection = Schema.Struct({
  /** Boxes the daemon runs at once for queued tasks (never two of one worker). */
  concurrency: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, 64)), { default: () => 2 }),
  /** Follow-ups a worker may have queued for itself (set_tasks) at once. */
  max_self_tasks: Schema.optionalWith(Schema.Int.pipe(Schema.between(0, 100)), { default: () => 5 }),
  /**
   * A task whose run a stop, a crash or a reboot ended: "resume" puts it back in the queue to
   * carry on as a continuation of that run (its pi session resumed); "fail" ends it failed.
   */
  on_interrupt: Schema.optionalWith(Schema.Literal("resume", "fail"), { default: () => "resume" as const }),
  /**
   * How many times a task whose run failed by no person's decision — a failed model call, the
   * engine losing the box, a failed preflight — is tried again (a task's own --retries wins);
   * never after a ceiling, a budget stop or a cancel.
   */
  retries: Schema.optionalWith(Schema.Int.pipe(Schema.between(0, 20)), { default: () => 0 }),
  /** Seconds before the first retry; each next waits twice as long, at most an hour. */
  retry_backoff_s: Schema.optionalWith(Schema.Number.pipe(Schema.between(0, 3600)), { default: () => 30 }),
  /** Days a finished task stays in the live list; then it is archived (task show and task list --all still read it). */
  keep_days: Schema.optionalWith(Schema.Number.pipe(Schema.between(1, 3650)), { default: () => 30 })
})

const Usd = Schema.Number.pipe(Schema.finite(), Schema.positive())

/** Spend limits a run, a worker's day and the org's day may not pass (UTC days); absent, nothing is limited. */
const BudgetFields = {
  run_usd: Schema.optional(Usd),
  run_tokens: Schema.optional(Schema.Int.pipe(Schema.positive())),
  worker_daily_usd: Schema.optional(Usd)
}

export const BudgetSection = Schema.Struct({
  ...BudgetFields,
  org_daily_usd: Schema.optional(Usd),
  /** An answer that crosses a budget mid-stream: cut at the next event with a terminal error (default), or let it finish. */
  on_cross: Schema.optionalWith(Schema.Literal("cut", "finish"), { default: () => "cut" as const })
})

/** A worker's own limits (worker.toml [budget]); each set one replaces the org's for that worker. */
export const WorkerBudget = Schema.Struct(BudgetFields)

/** USD per million tokens of one model (or a prefix ending in "*"): what the gateway's cost estimate uses. */
export const Price = Schema.Struct({
  model: Schema.NonEmptyString,
  input: Schema.Number.pipe(Schema.nonNegative()),
  output: Schema.Number.pipe(Schema.nonNegative()),
  cache_read: Schema.optional(Schema.Number.pipe(Schema.nonNegative())),
  cache_write: Schema.optional(Schema.Number.pipe(Schema.nonNegative()))
})
export type PriceRule = typeof Price.Type

/** Tools a model provider runs on its own side, reaching the network where the gateway cannot see. */
export const SERVER_TOOL_KINDS = ["web_search", "web_fetch", "code_execution", "mcp"] as const

const GrantFields = Schema.Struct({
  name: Schema.NonEmptyString,
  hosts: Schema.NonEmptyArray(Host),
  scope: Scope,
  credential: Schema.NonEmptyString,
  ports: Schema.optional(Schema.Array(Port)),
  /** Which header carries the credential; by default the credential's own kind decides. */
  header: Schema.optional(Schema.Literal("x-api-key", "bearer", "basic")),
  /** Provider-side tools a model request on this grant may declare (none by default: they are egress the gateway cannot see). */
  server_tools: Schema.optional(Schema.Array(Schema.Literal(...SERVER_TOOL_KINDS))),
  /** When set, each web search/fetch tool is limited to these domains (and those under them), passed to the provider. */
  server_tool_domains: Schema.optional(Schema.NonEmptyArray(Host)),
  /** [[grant.rules]]: which requests the credential goes with (config/requestRule.ts); the first that matches decides. */
  rules: Schema.optional(Schema.Array(RequestRule)),
  /** What decides a request no rule matches: allow when the grant has no rules, deny otherwise. */
  default: Schema.optional(Schema.Literal(...RULE_ACTIONS))
})

// A rule that can never match, or never decide, is a mistake that would read as a protection: refused at load.
export const Grant = GrantFields.pipe(Schema.filter((g) => {
  const problem = rulesProblem(g.rules ?? [], g.default)
  return problem === undefined || { path: ["rules", problem.index], message: `grant "${g.name}": ${problem.message}` }
}))

const AllowFields = Schema.Struct({
  hosts: Schema.NonEmptyArray(Host),
  scope: Scope,
  ports: Schema.optional(Schema.Array(Port)),
  /**
   * [[allow.rules]]: which requests to its hosts go through (config/requestRule.ts). An allow with rules
   * (or a default) is intercepted — TLS terminated with roster's CA, which the box already trusts — and
   * decided request by request, no credential injected; without, it is tunnelled as is.
   */
  rules: Schema.optional(Schema.Array(RequestRule)),
  /** What decides a request no rule matches: allow when the allow has no rules, deny otherwise. */
  default: Schema.optional(Schema.Literal(...RULE_ACTIONS))
})

export const Allow = AllowFields.pipe(Schema.filter((a) => {
  const problem = rulesProblem(a.rules ?? [], a.default)
  return problem === undefined || { path: ["rules", problem.index], message: `allow for hosts = ${JSON.stringify(a.hosts)}: ${problem.message}` }
}))

export const Expose = Schema.Struct({
  env: Schema.String.pipe(Schema.pattern(/^[A-Za-z_][A-Za-z0-9_]*$/, { message: () => "env is a variable name" })),
  credential: Schema.NonEmptyString,
  scope: Scope
})

export const Route = Schema.Struct({
  host: Host,
  upstream: Schema.String.pipe(Schema.pattern(/^https?:\/\/[^/\s]+\/?$/, {
    message: () => `upstream is "http://host:port" or "https://host:port"`
  }))
})

const MountFields = Schema.Struct({
  name: Schema.String.pipe(Schema.pattern(/^[a-z0-9][a-z0-9._-]{0,63}$/, {
    message: () => "a mount name is lower-case letters, digits, '.', '_' or '-'"
  })),
  path: Schema.String.pipe(Schema.filter((p) => p.startsWith("/") || "path must be absolute")),
  kind: Schema.optionalWith(Schema.Literal("dir", "repo"), { default: () => "dir" as const }),
  rw: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  /** repo only: a per-run clone on its own branch, the canonical repo a read-only origin, unlanded work quarantined. */
  gated: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  /** Gated repos: paths (a file, or a folder and all under it) knowledge_push refuses to change. */
  protect: Schema.optionalWith(Schema.Array(Schema.NonEmptyString), { default: () => [] }),
  /** Gated repos: the most a knowledge_push may add to the canonical repo (new objects, uncompressed). */
  push_max: Schema.optionalWith(Size("push_max"), { default: () => "64m" }),
  workers: Schema.optional(Schema.Array(Schema.String))
})

// A gate the user asked for and did not get is worse than an error: a gated "dir" would be a raw host mount.
export const Mount = MountFields.pipe(Schema.filter((m) =>
  m.kind === "repo" || (!m.gated && m.protect.length === 0) || {
    path: [m.gated ? "gated" : "protect"],
    message: `${m.gated ? "gated" : "protect"} applies to kind = "repo" only: set kind = "repo" (a git repository) ` +
      `or remove ${m.gated ? "gated" : "protect"} from mount "${m.name}"`
  }
))

/** Host-side worker memory: how much of it a Start briefing carries, and how much a worker may keep. */
export const MemorySection = Schema.Struct({
  /** Characters of memory in a Start briefing (newest first; a line says how many were left out). */
  brief_max: Schema.optionalWith(Schema.Int.pipe(Schema.between(0, 200_000)), { default: () => 8000 }),
  /** Entries a worker may keep (pending ones count). */
  max_entries: Schema.optionalWith(Schema.Int.pipe(Schema.between(0, 100_000)), { default: () => 500 }),
  /** Characters in one entry. */
  entry_max: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, 100_000)), { default: () => 2000 })
})
export type MemoryPolicy = typeof MemorySection.Type

const ChatId = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9._-]{1,64}$/, {
  message: () => "a chat channel id is the service's id of the channel (letters, digits, '.', '_', '-'; e.g. C0123ABCD or 1234567890)"
}))

/** One `[[chat.channel]]`: a channel of the service mapped to a worker, and who may drive it. */
export const ChatChannel = Schema.Struct({
  id: ChatId,
  worker: Schema.String.pipe(Schema.pattern(/^[a-z][a-z0-9-]{0,31}$/, { message: () => "worker is a worker name (e.g. \"alice\")" })),
  /** The service's user ids who may drive the worker; everyone else is ignored and counted, and never reaches a box. */
  allow_users: Schema.optionalWith(Schema.Array(ChatId), { default: () => [] }),
  /** Who may decide a held request of the channel's runs with its card's buttons (default: allow_users). */
  approvers: Schema.optional(Schema.Array(ChatId)),
  /** Minutes the channel's session waits for the next message before it ends. */
  idle_min: Schema.optionalWith(IdleMinutes, { default: () => 30 }),
  /** The channel session's whole-session ceiling (default: [box] session_ceiling_min). */
  ceiling_min: Schema.optional(Minutes),
  /** Messages of the thread (else the channel) a session's first turn is given from the service, newest kept (0: none). */
  history_max: Schema.optionalWith(Schema.Int.pipe(Schema.between(0, 100)), { default: () => 30 }),
  /** US dollars (estimated) a UTC day the channel's sessions, and the work they queue, may spend together. */
  budget_usd_day: Schema.optional(Usd)
})
export type ChatChannel = typeof ChatChannel.Type

/** One `[[chat]]`: a Slack or Discord connection and the channels of it that reach workers. */
export const Chat = Schema.Struct({
  provider: Schema.Literal("slack", "discord"),
  /** The vault connection holding its tokens (`roster connection add slack`). */
  connection: Schema.String.pipe(Schema.pattern(/^[a-z0-9][a-z0-9._-]{0,63}$/, { message: () => "connection is a connection name (roster connection list)" })),
  /** Answer only messages that mention the bot, or every message of an allowed user. */
  respond: Schema.optionalWith(Schema.Literal("mention", "all"), { default: () => "mention" as const }),
  /** A turn that ended with text but no send: a notice in the thread, the text posted for the worker, or nothing. */
  unsent: Schema.optionalWith(Schema.Literal("notice", "post", "drop"), { default: () => "notice" as const }),
  /** Characters of one chat message that reach a box; longer ones are cut, and the sender told. */
  message_max: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, 100_000)), { default: () => 4000 }),
  /** Reactions on the message a turn serves (seen, then answered or not) and Discord's typing indicator while it runs. */
  reactions: Schema.optionalWith(Schema.Boolean, { default: () => true }),
  /** Megabytes one file of a message may have to be fetched into the box (at most 10 a message); a larger one is named, not fetched. */
  file_max: Schema.optionalWith(Schema.Number.pipe(Schema.finite(), Schema.positive(), Schema.lessThanOrEqualTo(1024)), { default: () => 20 }),
  /** Turns one channel may start in a minute; more get a polite refusal. */
  turns_per_min: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, 600)), { default: () => 6 }),
  /** The service's API base (Enterprise Grid, a proxy, a test stand-in). */
  api_url: Schema.optional(Schema.String.pipe(Schema.pattern(/^https?:\/\/[^\s]+\/$/, {
    message: () => `api_url is an http(s) URL ending in "/" (e.g. "https://slack.example.com/api/")`
  }))),
  channel: Schema.optionalWith(Schema.Array(ChatChannel), { default: () => [] })
})
export type ChatRule = typeof Chat.Type

/** A `[[chat]]`'s channel of this id (ids compared as the services do: case aside). */
export const chatChannelOf = (chat: ChatRule, id: string): ChatChannel | undefined =>
  chat.channel.find((c) => c.id.toLowerCase() === id.toLowerCase())

/** The `[[chat]]` and `[[chat.channel]]` a place belongs to, if org.toml maps it. */
export const chatFor = (
  org: { readonly chat: ReadonlyArray<ChatRule> },
  p: { readonly provider: ChatRule["provider"]; readonly channel: string }
): { readonly chat: ChatRule; readonly channel: ChatChannel } | undefined => {
  for (const chat of org.chat) {
    const channel = chat.provider === p.provider ? chatChannelOf(chat, p.channel) : undefined
    if (channel) return { chat, channel }
  }
  return undefined
}

/** A channel mapped twice would have two sessions answering one message: refused at load, naming both. */
const chatChannelsOnce = (chats: ReadonlyArray<ChatRule>) => {
  const seen = new Map<string, string>()
  for (const [i, c] of chats.entries()) {
    for (const [j, ch] of c.channel.entries()) {
      const key = `${c.provider}:${ch.id.toLowerCase()}`
      const where = `chat[${i}].channel[${j}]`
      const before = seen.get(key)
      if (before) return { path: [i, "channel", j, "id"], message: `${c.provider} channel ${ch.id} is mapped twice (${before} and ${where}): keep one` }
      seen.set(key, where)
    }
  }
  return true
}

/** The schema of org.toml: every section with its safe default; unknown keys are errors. */
export const OrgSchema = Schema.Struct({
  engine: Schema.optionalWith(EngineSection, { default: () => ({ image: "roster-box:1" }) }),
  box: Schema.optionalWith(BoxSection, { default: () => Schema.decodeSync(BoxSection)({}) }),
  gateway: Schema.optionalWith(GatewaySection, { default: () => Schema.decodeSync(GatewaySection)({}) }),
  supervisor: Schema.optionalWith(SupervisorSection, { default: () => ({ concurrency: 2, max_self_tasks: 5, on_interrupt: "resume" as const, retries: 0, retry_backoff_s: 30, keep_days: 30 }) }),
  grant: Schema.optionalWith(Schema.Array(Grant), { default: () => [] }),
  allow: Schema.optionalWith(Schema.Array(Allow), { default: () => [] }),
  expose: Schema.optionalWith(Schema.Array(Expose), { default: () => [] }),
  route: Schema.optionalWith(Schema.Array(Route), { default: () => [] }),
  mount: Schema.optionalWith(Schema.Array(Mount), { default: () => [] }),
  budget: Schema.optionalWith(BudgetSection, { default: () => ({ on_cross: "cut" as const }) }),
  price: Schema.optionalWith(Schema.Array(Price), { default: () => [] }),
  memory: Schema.optionalWith(MemorySection, { default: () => ({ brief_max: 8000, max_entries: 500, entry_max: 2000 }) }),
  chat: Schema.optionalWith(Schema.Array(Chat).pipe(Schema.filter(chatChannelsOnce)), { default: () => [] }),
  /** One node of a fleet on Postgres; absent, one machine on files. */
  cluster: Schema.optional(ClusterSection)
})

/** org.toml, decoded and defaulted. */
export type Org = typeof OrgSchema.Type
export type BoxPolicy = Org["box"]
export type AllowRule = typeof Allow.Type
export type GrantRule = typeof Grant.Type
/** One `[[mount]]` of org.toml: a host folder or repository granted to workers. */
export type MountRule = typeof Mount.Type

/** The [[mount]]s granted to a worker (all workers when a mount names none). */
export const mountsFor = (org: Org, worker: string): ReadonlyArray<MountRule> =>
  org.mount.filter((m) => !m.workers || m.workers.includes(worker))

export const WorkerSchema = Schema.Struct({
  model: Schema.optional(Schema.NonEmptyString),
  thinking: Schema.optional(Schema.Literal("off", "minimal", "low", "medium", "high", "xhigh", "max")),
  store: Schema.optionalWith(
    Schema.Struct({ snapshots: Schema.optionalWith(Schema.Int.pipe(Schema.between(0, 1000)), { default: () => 5 }) }),
    { default: () => ({ snapshots: 5 }) }
  ),
  budget: Schema.optional(WorkerBudget)
})
/** A worker's worker.toml: model, thinking, and how many store snapshots to keep. */
export type WorkerSettings = typeof WorkerSchema.Type
