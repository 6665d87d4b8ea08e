import { Schema } from "effect"

/** The lockdown could not be made sure (network, gateway, firewall): the box is not started, and the error names the fix. */
export class LockdownError extends Schema.TaggedError<LockdownError>()("LockdownError", {
  reason: Schema.String
}) {
  override get message() {
    return `refusing to start the box with open egress: ${this.reason}`
  }
}

/** This deployment's gateway is not up (or not this deployment's): no box starts, and the fix is to start it. */
export class GatewayDown extends Schema.TaggedError<GatewayDown>()("GatewayDown", {
  port: Schema.Number,
  reason: Schema.String
}) {
  override get message() {
    return `refusing to start the box with open egress: ${this.reason} — start it with: roster server start`
  }
}

/** What the Docker engine needs for gVisor: runsc in the network namespace Docker made for the box. */
export const RUNSC_ENTRY = { path: "/usr/bin/runsc", runtimeArgs: ["--network=host"] } as const
export const RUNSC_DAEMON_JSON = JSON.stringify({ runtimes: { runsc: RUNSC_ENTRY } })

/** How to give the engine gVisor, said wherever a box would otherwise run without it. */
export const HOW_TO_ADD_RUNSC = `install gVisor (apt-get install runsc), add ${RUNSC_DAEMON_JSON} to /etc/docker/daemon.json and reload ` +
  `dockerd (kill -HUP $(cat /var/run/docker.pid)) — roster doctor --fix does both as root`

/** `[box] runtime = "runsc"` on an engine that has no such runtime. */
export class RuntimeMissing extends Schema.TaggedError<RuntimeMissing>()("RuntimeMissing", {
  registered: Schema.Array(Schema.String)
}) {
  override get message() {
    return `[box] runtime = "runsc" but the Docker engine has no runtime named runsc (it has: ${this.registered.join(", ") || "none"}): ` +
      `${HOW_TO_ADD_RUNSC}; or set [box] runtime = "auto" to fall back to runc`
  }
}
