import { SqlClient } from "@effect/sql/SqlClient"
import { Clock, Effect, Layer, Schema } from "effect"
import type { ClusterSection } from "../config/cluster.js"
import type { Org } from "../config/schema.js"
import { FleetNodeView } from "../contract/fleet.js"
import { fleetSqlLayer, whereOf } from "./connect.js"
import { configFingerprint } from "./fingerprint.js"
import { SCHEMA_VERSION, schemaVersion } from "./migrations.js"
import { listNodes, nodeView } from "./nodes.js"
import { nodeNameOf } from "../config/nodeName.js"
import { checkSharedData } from "./sharedData.js"
import { runnerCalls, withPings } from "./rpc/calls.js"
import { readRpcKey } from "./rpc/key.js"
import { listenAddress } from "./rpc/server.js"

/** Clocks further apart than this make node timeouts and the budgets' UTC days disagree. */
export const SKEW_WARN_MS = 2000

export const FleetCheck = Schema.Struct({
  node: Schema.String,
  database: Schema.String,
  connected: Schema.Boolean,
  /** Why not, with the fix (connected false), or a later check's failure. */
  problem: Schema.NullOr(Schema.String),
  schema: Schema.NullOr(Schema.Struct({ found: Schema.Number, known: Schema.Number })),
  shared_data: Schema.Struct({ folder: Schema.String, ok: Schema.Boolean, fleet: Schema.NullOr(Schema.String), detail: Schema.NullOr(Schema.String) }),
  /** This machine's clock minus the database's, now. */
  skew_ms: Schema.NullOr(Schema.Number),
  nodes: Schema.Array(FleetNodeView),
  /** `[cluster] listen`, checked (this machine's address, on no container bridge); absent without one. */
  listen: Schema.optional(Schema.Struct({ at: Schema.String, problem: Schema.NullOr(Schema.String) }))
})
export type FleetCheck = typeof FleetCheck.Type

const firstLine = (e: unknown) => (e instanceof Error ? e.message : String(e)).split("\n")[0] ?? ""

/** What `roster doctor` says of this node's fleet: the database, its schema, the shared folder, clocks, and the other nodes. */
export const checkFleet = (org: Org, cluster: ClusterSection) =>
  Effect.scoped(Effect.gen(function*() {
    const named = nodeNameOf(cluster)
    const node = typeof named === "string" ? named : named.invalid
    const base = { node, database: whereOf(cluster), shared: { folder: cluster.shared_data, ok: false, fleet: null, detail: null } }
    const built = yield* Layer.build(fleetSqlLayer(cluster, { maxConnections: 1 })).pipe(Effect.either)
    if (built._tag === "Left") {
      return { node, database: base.database, connected: false, problem: built.left.message, schema: null, shared_data: base.shared, skew_ms: null, nodes: [] } satisfies FleetCheck
    }
    return yield* Effect.gen(function*() {
      const sql = yield* SqlClient
      const before = yield* Clock.currentTimeMillis
      const dbNow = yield* sql<{ readonly ms: number }>`SELECT (extract(epoch FROM now()) * 1000)::float8 AS ms`
      const after = yield* Clock.currentTimeMillis
      const skew = Math.round((before + after) / 2 - (dbNow[0]?.ms ?? before))
      const found = yield* schemaVersion
      const shared = yield* checkSharedData(cluster.shared_data, node).pipe(
        Effect.map((s) => ({ folder: cluster.shared_data, ok: true, fleet: s.fleet, detail: null })),
        Effect.catchTag("SharedDataError", (e) => Effect.succeed({ folder: cluster.shared_data, ok: false, fleet: null, detail: e.message })),
        // The database's answer is half of the check (whose fleet the folder is). With no schema yet there is no fleet to
        // ask about (the first daemon makes both); with one, an error there is the check's failure, never a pass.
        Effect.catchTag("SqlError", (e) =>
          Effect.succeed(found < 1
            ? { folder: cluster.shared_data, ok: true, fleet: null, detail: null }
            : { folder: cluster.shared_data, ok: false, fleet: null, detail: `the fleet's database could not say whose folder it is (${firstLine(e)})` }))
      )
      const mine = yield* configFingerprint(org)
      const nodes = found >= 1 ? yield* listNodes : []
      const views = nodes.map((n) => nodeView(n, cluster.node_timeout_s, node, mine))
      // Each live node's runner RPC, asked as a node would: signed with the fleet's key.
      const key = found >= 10 ? yield* readRpcKey : undefined
      const listen = cluster.listen
        ? { listen: { at: cluster.listen, problem: yield* listenAddress(cluster.listen).pipe(Effect.as(null), Effect.catchAll((e) => Effect.succeed(e.message))) } }
        : {}
      return {
        node,
        database: base.database,
        connected: true,
        problem: typeof named === "string" ? null : `ROSTER_NODE=${named.invalid} is not a node name`,
        schema: { found, known: SCHEMA_VERSION },
        shared_data: shared,
        skew_ms: skew,
        nodes: key ? yield* withPings(nodes, views, runnerCalls(node, key, Effect.succeed(nodes)).ping) : views,
        ...listen
      } satisfies FleetCheck
    }).pipe(
      Effect.provide(built.right),
      Effect.catchAll((e) => Effect.succeed({
        node, database: base.database, connected: true, problem: firstLine(e), schema: null, shared_data: base.shared, skew_ms: null, nodes: []
      } satisfies FleetCheck))
    )
  }))

const signed = (ms: number) => `${ms >= 0 ? "+" : ""}${ms} ms`

/** The check as doctor prints it. */
export const fleetCheckLines = (c: FleetCheck): ReadonlyArray<string> => {
  const head = `fleet: node ${c.node}, database ${c.database}`
  if (!c.connected) return [`${head} — CANNOT CONNECT: ${c.problem ?? ""}`]
  const lines = [`${head} — connected`]
  if (c.schema) {
    const s = c.schema
    lines.push(`  schema:      ${s.found === 0 ? `none yet (the first daemon to start creates it; this roster's is ${s.known})` :
      s.found === s.known ? `${s.found}, this roster's` : s.found < s.known ? `${s.found} (this roster migrates it to ${s.known} when its daemon starts)` :
      `${s.found}, NEWER than this roster's ${s.known}: another node runs a newer roster — upgrade this one`}`)
  }
  const sd = c.shared_data
  lines.push(`  shared data: ${sd.folder} — ${sd.ok ? `writable${sd.fleet ? `, the fleet's (${sd.fleet})` : " (no fleet yet: the first daemon marks it)"}` : `PROBLEM: ${sd.detail ?? ""}`}`)
  if (c.skew_ms !== null) {
    const far = c.nodes.filter((n) => n.state === "up" && Math.abs(n.skew_ms) > SKEW_WARN_MS).map((n) => n.name)
    lines.push(`  clocks:      this machine ${signed(c.skew_ms)} from the database's` +
      (c.nodes.length > 0 ? `; nodes at their last beat: ${c.nodes.filter((n) => n.state === "up").map((n) => `${n.name} ${signed(n.skew_ms)}`).join(", ")}` : ""))
    if (Math.abs(c.skew_ms) > SKEW_WARN_MS || far.length > 0) {
      lines.push(`  CLOCK SKEW over ${SKEW_WARN_MS / 1000} s (${[...(Math.abs(c.skew_ms) > SKEW_WARN_MS ? ["this machine"] : []), ...far].join(", ")}): ` +
        "node timeouts and the budgets' days go by the clock — run NTP (chrony, systemd-timesyncd) on every node")
    }
  }
  if (c.nodes.length > 0) {
    lines.push(`  nodes:       ${c.nodes.map((n) => `${n.name} ${n.state === "up" ? "up" : `${n.state.toUpperCase()} (last beat ${Math.round(n.heartbeat_age_s)} s ago)`}`).join(", ")}`)
  }
  for (const n of c.nodes.filter((x) => x.config_differs.length > 0 && x.state !== "left")) {
    lines.push(`  ${n.name}'s config differs from this node's: ${n.config_differs.join(", ")} — every node holds the same files (only [cluster] node and [gateway] port differ)`)
  }
  lines.push(...rpcLines(c))
  if (c.problem) lines.push(`  PROBLEM: ${c.problem}`)
  return lines
}

/** This node's `listen` and every live node's runner RPC as this machine reached it. */
const rpcLines = (c: FleetCheck): ReadonlyArray<string> => {
  const asked = c.nodes.filter((n) => n.advertise && n.rpc)
  if (!c.listen && asked.length === 0) return []
  const listen = !c.listen ? "this node does not listen ([cluster] listen unset: the others cannot tell it of a decision at once)"
    : c.listen.problem === null ? `listens on ${c.listen.at}` : `PROBLEM: ${c.listen.problem}`
  const reached = asked.map((n) => `${n.name} ${n.rpc?.ok ? `${n.rpc.ms ?? 0} ms` : `NOT ANSWERING at ${n.advertise} (${n.rpc?.detail ?? "no answer"})`}`)
  return [`  runner RPC:  ${listen}${reached.length > 0 ? `; reached: ${reached.join(", ")}` : ""}`]
}
