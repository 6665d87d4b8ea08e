import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"
import * as crypto from "node:crypto"

/** The fleet's runner RPC key: made by the first node that asks (two at once: one wins), the same for every node after. */
export const rpcKey = Effect.gen(function*() {
  const sql = yield* SqlClient
  yield* sql`INSERT INTO roster_rpc_key (key) VALUES (${crypto.randomBytes(32).toString("hex")}) ON CONFLICT (one) DO NOTHING`
  const rows = yield* sql<{ readonly key: string }>`SELECT key FROM roster_rpc_key`.withoutTransform
  return Buffer.from(rows[0]?.key ?? "", "hex")
})

/** The key as the database holds it, without making one (doctor reads, never writes): none before a daemon made it. */
export const readRpcKey = Effect.gen(function*() {
  const sql = yield* SqlClient
  const exists = yield* sql<{ readonly t: string | null }>`SELECT to_regclass('roster_rpc_key')::text AS t`
  if (!exists[0]?.t) return undefined
  const rows = yield* sql<{ readonly key: string }>`SELECT key FROM roster_rpc_key`.withoutTransform
  return rows[0] ? Buffer.from(rows[0].key, "hex") : undefined
})
