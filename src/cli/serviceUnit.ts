/** What a systemd unit for a deployment's daemon needs to know. */
export interface UnitInput {
  readonly node: string
  /** Node's own flags this CLI runs with (bin/roster.js's shebang sets the young generation's size). */
  readonly nodeArgs: ReadonlyArray<string>
  readonly bin: string
  readonly configRoot: string
  /** The environment that makes the daemon find this deployment (ROSTER_HOME, or HOME and the XDG roots). */
  readonly env: Readonly<Record<string, string>>
  readonly user: boolean
}

const quote = (s: string) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `"${s.replace(/(["\\\\$`])/g, "\\\\$1")}"`)

/**
 * A systemd unit running `roster server start --foreground` for one deployment: started after
 * the Docker engine, restarted on failure, stopped with SIGTERM (the daemon's scope kills its
 * boxes and removes its rules), and ready only once the gateway answers as this deployment.
 * No secret goes in the unit: credentials belong in roster's vault.
 */
export const serviceUnit = (u: UnitInput) => {
  const cli = [u.node, ...u.nodeArgs, u.bin].map(quote).join(" ")
  const env = Object.entries(u.env).map(([k, v]) => `Environment=${quote(`${k}=${v}`)}`)
  return [
    "[Unit]",
    `Description=roster daemon (gateway and supervisor) for ${u.configRoot}`,
    ...(u.user ? [] : ["After=network-online.target docker.service", "Wants=network-online.target", "Requires=docker.service"]),
    "",
    "[Service]",
    "Type=simple",
    ...env,
    `ExecStart=${cli} server start --foreground`,
    // Ready means: the gateway answers /healthz as this deployment (server status --json says healthy).
    `ExecStartPost=/bin/sh -c 'for i in $(seq 60); do ${cli.replace(/'/g, "")} server status --json | grep -q "\\"healthy\\":true" && exit 0; sleep 0.5; done; exit 1'`,
    "Restart=on-failure",
    "RestartSec=5",
    "KillMode=mixed",
    "TimeoutStopSec=90",
    "",
    "[Install]",
    `WantedBy=${u.user ? "default.target" : "multi-user.target"}`,
    ""
  ].join("\n")
}
