import { Schema } from "effect"

/** The fleet's database could not be reached or refused this node: what, where, and the fix. */
export class FleetDbError extends Schema.TaggedError<FleetDbError>()("FleetDbError", {
  /** host:port/database, never the password. */
  where: Schema.String,
  detail: Schema.String,
  fix: Schema.String
}) {
  override get message() {
    return `the fleet's database ${this.where}: ${this.detail} — ${this.fix}`
  }
}

/** The database holds a schema newer than this roster knows: another node runs a newer version. */
export class FleetSchemaError extends Schema.TaggedError<FleetSchemaError>()("FleetSchemaError", {
  found: Schema.Number,
  known: Schema.Number
}) {
  override get message() {
    return `the fleet's database is at schema ${this.found}, this roster knows up to ${this.known}: another node runs a newer roster — ` +
      "upgrade this one (every node of a fleet runs the same version)"
  }
}

/** `[cluster] shared_data` is missing, not writable, or not the folder the other nodes use. */
export class SharedDataError extends Schema.TaggedError<SharedDataError>()("SharedDataError", {
  folder: Schema.String,
  detail: Schema.String,
  fix: Schema.String
}) {
  override get message() {
    return `[cluster] shared_data ${this.folder}: ${this.detail} — ${this.fix}`
  }
}

/** Another live daemon already holds this node's name in the fleet. */
export class NodeNameTaken extends Schema.TaggedError<NodeNameTaken>()("NodeNameTaken", {
  node: Schema.String,
  pid: Schema.Number,
  host: Schema.String,
  ageS: Schema.Number
}) {
  override get message() {
    return `node "${this.node}" is already in the fleet (pid ${this.pid} on ${this.host}, its last heartbeat ${this.ageS} s ago): ` +
      "give this machine its own name — [cluster] node in org.toml, or ROSTER_NODE"
  }
}

/** `[cluster] listen` names an address the runner RPC may not or cannot listen on. */
export class RunnerRpcListenError extends Schema.TaggedError<RunnerRpcListenError>()("RunnerRpcListenError", {
  listen: Schema.String,
  detail: Schema.String
}) {
  override get message() {
    return `[cluster] listen ${this.listen} ${this.detail} — name this machine's own address on the network the fleet's machines share, ` +
      `such as "10.0.0.5:7310" (never a box network's, never 0.0.0.0), and advertise it if the others reach it by another name`
  }
}
