import { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Schema } from "effect"
import type { FleetNodeView } from "../contract/fleet.js"
import type { ClusterSection } from "../config/cluster.js"
import { pidAlive } from "../contract/owner.js"
import { NodeNameTaken } from "./errors.js"
import { fenceAfterS } from "./lease.js"
import { fenceNode } from "./loss.js"
import { differingFiles } from "./fingerprint.js"

/** What a node says of itself at each heartbeat. */
export interface NodeBeat {
  readonly name: string
  /** This daemon's start: a restarted daemon is a new instance of the same node. */
  readonly instance: string
  readonly host: string
  readonly pid: number
  readonly version: string
  readonly advertise: string | null
  readonly startedAt: number
  readonly boxes: number
  readonly concurrency: number
  readonly load: number
  /** Each config file's digest (org.toml without its per-node keys, every file under workers/). */
  readonly config: Readonly<Record<string, string>>
}

/** A node as the fleet sees it: up (heartbeating), lost (silent past node_timeout_s), or left (stopped cleanly). */
export const NodeRow = Schema.Struct({
  name: Schema.String,
  instance: Schema.String,
  host: Schema.String,
  pid: Schema.Number,
  version: Schema.String,
  advertise: Schema.NullOr(Schema.String),
  started_ms: Schema.Number,
  heartbeat_ms: Schema.Number,
  age_s: Schema.Number,
  /** The node's clock minus the database's at its last heartbeat. */
  skew_ms: Schema.Number,
  boxes: Schema.Number,
  concurrency: Schema.Number,
  load: Schema.Number,
  config: Schema.Record({ key: Schema.String, value: Schema.String }),
  left: Schema.Boolean,
  /** The node that fenced this instance once it was lost (its tasks were re-queued or failed). */
  fenced_by: Schema.NullOr(Schema.String)
})
export type NodeRow = typeof NodeRow.Type
export type NodeState = "up" | "lost" | "left"

export const nodeState = (n: NodeRow, timeoutS: number): NodeState =>
  n.left ? "left" : n.fenced_by !== null || n.age_s > timeoutS ? "lost" : "up"

/** A node as status and doctor show it, its config compared with `mine` (this node's; none: nothing compared). */
export const nodeView = (r: NodeRow, timeoutS: number, self: string, mine: Readonly<Record<string, string>> | undefined): FleetNodeView => ({
  name: r.name,
  host: r.host,
  pid: r.pid,
  version: r.version,
  state: nodeState(r, timeoutS),
  heartbeat_age_s: Math.round(r.age_s * 10) / 10,
  boxes: r.boxes,
  concurrency: r.concurrency,
  load: Math.round(r.load * 100) / 100,
  skew_ms: Math.round(r.skew_ms),
  fenced_by: r.fenced_by,
  advertise: r.advertise,
  config_differs: mine && r.name !== self ? differingFiles(mine, r.config) : []
})

const decodeRows = Schema.decodeUnknown(Schema.Array(NodeRow))

/** Every node the fleet has known, by name, with ages measured on the database's clock. */
export const listNodes = Effect.gen(function*() {
  const sql = yield* SqlClient
  const rows = yield* sql`SELECT name, instance, host, pid, version, advertise,
      (extract(epoch FROM started_at) * 1000)::float8 AS started_ms,
      (extract(epoch FROM heartbeat_at) * 1000)::float8 AS heartbeat_ms,
      extract(epoch FROM (now() - heartbeat_at))::float8 AS age_s,
      (extract(epoch FROM (node_clock - heartbeat_at)) * 1000)::float8 AS skew_ms,
      boxes, concurrency, load::float8 AS load, config, left_at IS NOT NULL AS left, fenced_by
    FROM roster_nodes ORDER BY name`.withoutTransform
  return yield* decodeRows(rows).pipe(Effect.orDie)
})

const values = (b: NodeBeat, nodeClockMs: number) => ({
  name: b.name,
  instance: b.instance,
  host: b.host,
  pid: b.pid,
  version: b.version,
  advertise: b.advertise,
  started_at: new Date(b.startedAt),
  node_clock: new Date(nodeClockMs),
  boxes: b.boxes,
  concurrency: b.concurrency,
  load: b.load,
  config: JSON.stringify(b.config)
})

/**
 * Joins the fleet under this node's name. A name another live instance holds with a fresh
 * heartbeat is refused (two machines given one name would fence each other's work). A holder on
 * this machine whose process is gone (this node's daemon restarted) is taken over as it stands:
 * its boxes are adopted. A holder silent past the timeout is fenced first, as any node would
 * fence it (its tasks re-queued or failed), then taken over; one that left or was fenced is
 * taken over. `previous` is this process's own last instance (it joins again after its lease
 * lapsed): fenced by it whatever its age, then taken over. Returns what was fenced.
 */
export const registerNode = (b: NodeBeat, nodeClockMs: number, cluster: ClusterSection, previous?: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient
    return yield* sql.withTransaction(Effect.gen(function*() {
      const held = yield* sql<{
        readonly instance: string
        readonly pid: number
        readonly host: string
        readonly age_s: number
        readonly left: boolean
        readonly fenced: boolean
      }>`
        SELECT instance, pid, host, extract(epoch FROM (now() - heartbeat_at))::float8 AS age_s, left_at IS NOT NULL AS left,
          fenced_at IS NOT NULL AS fenced
        FROM roster_nodes WHERE name = ${b.name} FOR UPDATE`.withoutTransform
      const h = held[0]
      const restarted = h !== undefined && h.host === b.host && !(yield* pidAlive(h.pid))
      const own = h !== undefined && previous !== undefined && h.instance === previous
      if (h && h.instance !== b.instance && !h.left && !h.fenced && h.age_s <= fenceAfterS(cluster) && !restarted && !own) {
        return yield* new NodeNameTaken({ node: b.name, pid: h.pid, host: h.host, ageS: Math.round(h.age_s) })
      }
      const fenced = h && h.instance !== b.instance && !h.left && !h.fenced && (own || h.age_s > fenceAfterS(cluster))
        ? yield* fenceNode({ name: b.name, instance: h.instance }, cluster, b.name, own ? 0 : fenceAfterS(cluster))
        : undefined
      const v = values(b, nodeClockMs)
      yield* sql`INSERT INTO roster_nodes (name, instance, host, pid, version, advertise, started_at, heartbeat_at, node_clock,
          boxes, concurrency, load, config)
        VALUES (${v.name}, ${v.instance}, ${v.host}, ${v.pid}, ${v.version}, ${v.advertise}, ${v.started_at}, now(), ${v.node_clock},
          ${v.boxes}, ${v.concurrency}, ${v.load}, ${v.config}::jsonb)
        ON CONFLICT (name) DO UPDATE SET instance = EXCLUDED.instance, host = EXCLUDED.host, pid = EXCLUDED.pid,
          version = EXCLUDED.version, advertise = EXCLUDED.advertise, started_at = EXCLUDED.started_at,
          heartbeat_at = now(), node_clock = EXCLUDED.node_clock, boxes = EXCLUDED.boxes,
          concurrency = EXCLUDED.concurrency, load = EXCLUDED.load, config = EXCLUDED.config, left_at = NULL,
          fenced_at = NULL, fenced_by = NULL`.withoutTransform
      return fenced
    }))
  })

/**
 * One heartbeat: "ok"; "fenced" when the fleet declared this instance lost while it was silent
 * (nothing it runs can land any more); "lapsed" when it was silent past its lease
 * (`node_timeout_s`, by the database's clock) and no node has fenced it yet: a lease that ran out
 * is not renewed — the fleet showed the node lost and may re-run its tasks — so the instance is
 * over as a fenced one is (this node fences it and joins again as a new one); "taken" when another
 * daemon holds the name now. `stoodDown`: the node cut itself off and stopped its boxes before its
 * lease could lapse (the database did not answer), so nothing of it ran past the lease: renewed.
 */
export const beat = (b: NodeBeat, nodeClockMs: number, cluster: ClusterSection, stoodDown: boolean) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient
    const rows = yield* sql`UPDATE roster_nodes SET heartbeat_at = now(), node_clock = ${new Date(nodeClockMs)},
        boxes = ${b.boxes}, concurrency = ${b.concurrency}, load = ${b.load}, config = ${JSON.stringify(b.config)}::jsonb
      WHERE name = ${b.name} AND instance = ${b.instance} AND left_at IS NULL AND fenced_at IS NULL
        AND (${stoodDown}::boolean OR heartbeat_at > now() - make_interval(secs => ${cluster.node_timeout_s})) RETURNING name`.withoutTransform
    if (rows.length > 0) return "ok" as const
    const held = yield* sql<{ readonly fenced: boolean; readonly left: boolean }>`SELECT fenced_at IS NOT NULL AS fenced,
        left_at IS NOT NULL AS left FROM roster_nodes WHERE name = ${b.name} AND instance = ${b.instance}`.withoutTransform
    const h = held[0]
    if (h === undefined || h.left) return "taken" as const
    return h.fenced ? "fenced" as const : "lapsed" as const
  })

/** A clean stop: the node is marked left, so nothing mistakes it for a lost machine. */
export const leaveNode = (name: string, instance: string) =>
  Effect.flatMap(SqlClient, (sql) =>
    sql`UPDATE roster_nodes SET left_at = now() WHERE name = ${name} AND instance = ${instance}`.withoutTransform)
