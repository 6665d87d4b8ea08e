/** The commented org.toml `roster init` writes: safe defaults, every key shown. */
const TEMPLATE = `# roster — org.toml
# Every box runs in a locked-down container whose only way out is roster's gateway.
# Egress is denied unless a [[grant]] or [[allow]] below opens it.

[engine]
image = "roster-box:1"          # a bare local tag must exist (roster box build); a registry ref is pulled (24 h TTL)
# dir = "/path/to/roster"       # dev: mount this checkout read-only instead of the image's engine

[box]
pids_limit = 512                # 0 = no limit
memory = "4g"                   # a box's RAM ("0" lifts the limit — a runaway agent could then take the host down)
# cpus = "2"                    # cores; default: half the host's
egress_lockdown = false         # true: iptables pins box->host traffic to the gateway port (needs root)
runtime = "auto"                # "runsc" (gVisor: the box's syscalls never reach the host kernel), "runc", or
                                # "auto": runsc when Docker has it registered (roster doctor says how), else runc
ceiling_min = 30                # default one-shot ceiling, in minutes
session_ceiling_min = 240
turn_ceiling_min = 30
idle_secs = 600
tmp_size = "1g"                 # bound on the box's /tmp (a tmpfs: RAM, so it must be below memory)
transcript_max = "256m"         # stdout.jsonl cap (a marker line ends a cut transcript)
# identity_max = 64000          # characters a worker's identity.md may hold (the head of every run's system prompt)
line_max = "1m"                 # longest line shown or summarised (longer ones are cut, with a mark)
# preflight_probe = "203.0.113.1:443" # a box checks it cannot reach this directly as pi starts; unset, roster
                                # picks a TEST-NET address on none of this machine's networks (roster doctor says which)
warm = "recent"                 # after a worker's run the daemon readies its next box (pi waiting, its token bound
                                # to no run) so the next run starts at once; "off": every run starts its box when asked
warm_max = 2                    # warm boxes at once on this node (each holds a started box's memory)
warm_idle_min = 30              # a warm box no run took within this is recycled

[gateway]
port = 7300
# listen = ["172.30.0.1"]      # where boxes reach the gateway (default: the locked network's bridge); loopback is always added
approvals = "off"               # "ask": a refused request waits (approval_wait_s, 120) for roster approve / deny
# approvals_max_per_run = 8     # held at once per run (each is an open connection); past it refused at once
# approvals_max = 64            # held at once on this node, every run's together

[supervisor]
concurrency = 2                 # boxes the daemon runs at once for queued tasks (one per worker)
# on_interrupt = "resume"       # a task a stop, crash or reboot ended carries on as a continuation; "fail" ends it
# retries = 0                   # tries again after a failed model call, a lost box, a failed preflight (never a ceiling, budget or cancel)
# retry_backoff_s = 30          # the first retry's wait; each next twice as long, at most an hour
# keep_days = 30                # a finished task is archived after this (task show and task list --all still read it)
max_self_tasks = 5              # follow-ups a worker may queue for itself with set_tasks

[memory]                        # what workers remember (remember / forget in the box; roster memory on the host)
brief_max = 8000                # characters of memory a run's briefing carries (newest first)
max_entries = 500               # entries a worker may keep
entry_max = 2000                # characters in one entry

# Egress WITH a credential injected in transit (the box only ever holds a sentinel):
# [[grant]]
# name = "anthropic"
# hosts = ["api.anthropic.com"]
# scope = ["org/*"]             # "org/<worker>", "org/*", or "org" (host-side callers)
# credential = "anthropic"      # vault name: roster connection add anthropic
# server_tools = []             # provider-side tools a request may declare: "web_search", "web_fetch",
#                               # "code_execution", "mcp" — egress the gateway cannot see, so none by default
# server_tool_domains = ["example.com"]   # web search/fetch limited to these domains (passed to the provider)

# A grant that decides request by request: the first rule whose methods and paths match decides,
# "default" the rest (deny once a grant has rules). Paths are matched as the upstream gets them
# (escapes decoded, "//" and ".." resolved); "*" is one segment, a last "**" everything under. A request
# that could mean two things (a method override, "..;", a body read two ways) is refused (README).
# [[grant]]
# name = "github"
# hosts = ["api.github.example.com"]
# scope = ["org/alice"]
# credential = "github"
# default = "deny"
# [[grant.rules]]
# methods = ["DELETE"]
# action = "deny"                # "ask": held until a person approves that one request (roster approve)
# [[grant.rules]]
# methods = ["GET"]
# paths = ["/repos/acme/**"]
# case = "insensitive"           # GitHub reads owner and repository in any case (what ** matches keeps its own)
# action = "allow"
# [[grant.rules]]
# methods = ["POST"]
# paths = ["/repos/acme/*/pulls"]
# case = "insensitive"
# action = "allow"
# [[grant.rules]]                # a WebSocket upgrade goes through only where a rule names it
# paths = ["/repos/acme/*/events"]
# websocket = true
# action = "allow"

# An MCP server over HTTP, decided call by call (jsonrpc = true; graphql = true reads a GraphQL
# operation instead: operations = ["query", "mutation:CreateIssue"]):
# [[grant]]
# name = "files-mcp"
# hosts = ["mcp.example.com"]
# scope = ["org/alice"]
# credential = "files-mcp"
# [[grant.rules]]
# paths = ["/mcp"]
# jsonrpc = true
# calls = ["tools/call:write_file", "tools/call:delete_file"]
# action = "deny"
# [[grant.rules]]
# paths = ["/mcp"]
# jsonrpc = true
# calls = ["initialize", "notifications/initialized", "tools/list", "tools/call"]
# action = "allow"

# Egress without credentials (tunnelled as is; port 443 unless ports are listed):
# [[allow]]
# hosts = ["packages.example.org"]
# scope = ["org/*"]
# ports = [443]

# An [[allow]] with rules is intercepted (TLS terminated with roster's CA, nothing injected) and
# decided request by request, as a grant with rules is:
# [[allow]]
# hosts = ["mirror.example.com"]
# scope = ["org/*"]
# [[allow.rules]]
# methods = ["GET", "HEAD"]
# paths = ["/pub/**"]
# action = "allow"

# An env var set to the sentinel in the box, swapped in transit by the grant for its credential:
# [[expose]]
# env = "GITHUB_TOKEN"
# credential = "github"
# scope = ["org/alice"]

# Send a host's traffic to another upstream (a self-hosted model gateway):
# [[route]]
# host = "api.anthropic.com"
# upstream = "http://127.0.0.1:8089"

# Host folders granted to workers, under /pihome/mnt/<name>:
# [[mount]]
# name = "notes"
# path = "/home/me/notes"
# kind = "dir"                  # dir | repo
# rw = false
# workers = ["alice"]           # default: all
#
# A git repository the worker works on through a gate: each run gets its own clone on branch
# roster/<worker>/<run-id>; whatever it does not land with knowledge_push is parked on
# refs/quarantine/run-<run-id> in this repository, never merged by accident.
# [[mount]]
# name = "knowledge"
# path = "/home/me/knowledge"   # the canonical repository (its default branch is what lands)
# kind = "repo"
# gated = true
# rw = true                     # the clone is writable (read-only without)
# protect = [".github", "LICENSE"]  # paths knowledge_push refuses to change
# push_max = "64m"              # the most one knowledge_push may add
#
# Talk to workers where the team talks. Tokens first: roster connection add slack (or discord);
# the daemon holds them and posts for the worker, no box ever sees one.
# [[chat]]
# provider = "slack"            # slack | discord
# connection = "slack"          # the vault connection with its tokens
# respond = "mention"           # mention: only messages that mention the bot; all: every message
# unsent = "notice"             # a turn that answered without the send tool: notice | post | drop
# message_max = 4000            # characters of one message that reach a box
# turns_per_min = 6             # turns one channel may start a minute
# [[chat.channel]]
# id = "C0123ABCD"              # the service's id of the channel
# worker = "alice"
# allow_users = ["U0123ABCD"]   # who may drive the worker; everyone else is ignored
# idle_min = 30                 # the channel's session ends after this long without a message
#
# One roster over several machines: each daemon is a node of a fleet sharing one Postgres database
# and one shared folder. The same org.toml on every node (only node and [gateway] port differ;
# ROSTER_NODE and ROSTER_GATEWAY_PORT set them per machine). Absent, this machine alone, on files.
# [cluster]
# database = "postgres://roster@db.example.test:5432/roster"  # no password here: roster connection add postgres (or PGPASSWORD)
# node = "machine-1"            # this machine's name in the fleet; default the host name
# shared_data = "/mnt/roster"   # mounted at this path on every node (NFS, CephFS, EFS)
# listen = "eth0:7310"          # this node's runner RPC: an interface (the same line on every node) or an
#                               # address of this machine, never a box network's; other nodes tell it of a
#                               # decision there at once, and server status / doctor check every node's
# advertise = "10.0.0.5:7310"   # where the others reach it, if not at listen's address
# node_timeout_s = 30           # a node silent this long is lost: its attempts fenced, its tasks re-run
# on_node_loss = "retry"        # retry: a lost node's running task runs once more elsewhere; fail
# lock_timeout_s = 3            # a statement waits this long for a row another node holds, then is tried again
# statement_timeout_s = 10      # the longest one statement may run
# idle_transaction_timeout_s = 10  # a transaction left open by a frozen node is ended by the database
`

const LOCKDOWN_OFF = "egress_lockdown = false         # true: iptables pins box->host traffic to the gateway port (needs root)"
const LOCKDOWN_ON = "egress_lockdown = true          # roster init ran as root: box->host traffic is pinned to the gateway port, so a box\n" +
  "                                # cannot reach a local database, a published container port or ssh around the gateway"

/** The commented org.toml `roster init` writes: safe defaults, every key shown; as root, the host pinned too. */
export const orgTemplate = (options: { readonly root: boolean }) => (options.root ? TEMPLATE.replace(LOCKDOWN_OFF, LOCKDOWN_ON) : TEMPLATE)

export const ORG_TEMPLATE = TEMPLATE
