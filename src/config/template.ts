/** The commented org.toml `roster init` writes: safe defaults, every key shown. */
export const ORG_TEMPLATE = `# roster — org.toml
# Every box runs in a locked-down container whose only way out is roster's gateway.
# Egress is denied unless a [[grant]] or [[allow]] below opens it.

[engine]
image = "roster-box:1"          # a bare local tag must exist (roster box build); a registry ref is pulled (24 h TTL)
# dir = "/path/to/roster"       # dev: mount this checkout read-only instead of the image's engine

[box]
pids_limit = 512                # 0 = no limit
# memory = "4g"
# cpus = "2"
egress_lockdown = false         # true: iptables pins box->host traffic to the gateway port (needs root)
ceiling_min = 30                # default one-shot ceiling, in minutes
session_ceiling_min = 240
turn_ceiling_min = 30
idle_secs = 600
tmp_size = "2g"                 # bound on the box's /tmp (tmpfs)

[gateway]
port = 7300

[supervisor]
concurrency = 2                 # boxes the daemon runs at once for queued tasks (one per worker)
max_self_tasks = 5              # follow-ups a worker may queue for itself with set_tasks

# Egress WITH a credential injected in transit (the box only ever holds a sentinel):
# [[grant]]
# name = "anthropic"
# hosts = ["api.anthropic.com"]
# scope = ["org/*"]             # "org/<worker>", "org/*", or "org" (host-side callers)
# credential = "anthropic"      # vault name: roster connection add anthropic

# Egress without credentials (tunnelled as is; port 443 unless ports are listed):
# [[allow]]
# hosts = ["packages.example.org"]
# scope = ["org/*"]
# ports = [443]

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
`
