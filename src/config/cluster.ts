import { Schema } from "effect"

/**
 * A Postgres URL naming host, port, role and database — never a password: org.toml is the same
 * file on every node and is read by people, so the password comes from the vault
 * (`roster connection add postgres`) or PGPASSWORD.
 */
const DatabaseUrl = Schema.String.pipe(Schema.filter((text) => {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return `a Postgres URL such as "postgres://roster@db.example.test:5432/roster"`
  }
  if (url.protocol !== "postgres:" && url.protocol !== "postgresql:") return `a Postgres URL starts with postgres:// (got ${url.protocol}//)`
  if (url.password !== "") {
    return "holds a password: take it out of org.toml and keep it in the vault (roster connection add postgres) or in PGPASSWORD"
  }
  if (url.hostname === "") return "names no host"
  return true
}))

/** `host:port` of a listener: an address, a name, or (for listen) an interface such as `eth0`, and a port. */
const HostPort = Schema.String.pipe(Schema.pattern(/^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, {
  message: () => `host:port, such as "10.0.0.5:7310"`
}), Schema.filter((text) => {
  const port = Number(text.slice(text.lastIndexOf(":") + 1))
  return (port >= 1 && port <= 65535) || "the port is 1–65535"
}))

const NodeName = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, {
  message: () => "a node name is letters, digits, '.', '_' or '-' (up to 63), such as the host name"
}))

/**
 * `[cluster]`: this daemon is one node of a fleet sharing one Postgres database and one shared
 * folder. Absent, roster is one machine on files, exactly as without it.
 */
export const ClusterSection = Schema.Struct({
  database: DatabaseUrl,
  /** This machine's name in the fleet; default the host name (ROSTER_NODE sets it per machine). */
  node: Schema.optional(NodeName),
  /** A folder every node mounts at the same path (NFS, CephFS, EFS): stores, repos, memory, run folders. */
  shared_data: Schema.String.pipe(Schema.filter((p) => p.startsWith("/") || "path must be absolute")),
  /**
   * Where this node's runner RPC listens: an interface (`eth0:7310`, the same line on every node) or
   * an address of this machine — never every address, never a box network's (checked at start).
   */
  listen: Schema.optional(HostPort),
  /** Where the other nodes reach it (default: listen). */
  advertise: Schema.optional(HostPort),
  /** Seconds without a heartbeat after which a node is lost, its attempts fenced and its tasks re-run. */
  node_timeout_s: Schema.optionalWith(Schema.Int.pipe(Schema.between(5, 3600)), { default: () => 30 }),
  /** What a lost node's running tasks become: run once more on another node, or failed. */
  on_node_loss: Schema.optionalWith(Schema.Literal("retry", "fail"), { default: () => "retry" as const }),
  /**
   * How long any statement of this node waits for a row lock another holds before it gives up
   * (and is tried again by its loop): no node, however stuck, holds another's dispatch.
   */
  lock_timeout_s: Schema.optionalWith(Schema.Number.pipe(Schema.between(0.1, 60)), { default: () => 3 }),
  /** The longest one statement of this node may run. */
  statement_timeout_s: Schema.optionalWith(Schema.Number.pipe(Schema.between(1, 600)), { default: () => 10 }),
  /** A transaction left open and idle this long (its node frozen, SIGSTOP, cut off) is ended by the database, its locks released. */
  idle_transaction_timeout_s: Schema.optionalWith(Schema.Number.pipe(Schema.between(1, 600)), { default: () => 10 })
})
export type ClusterSection = typeof ClusterSection.Type
