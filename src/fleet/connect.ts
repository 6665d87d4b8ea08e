import type { SqlClient } from "@effect/sql/SqlClient"
import { SqlError as SqlErrorClass, type SqlError } from "@effect/sql/SqlError"
import { Config, Context, Effect, Layer, Option, Redacted, type Stream } from "effect"
import type { ClusterSection } from "../config/cluster.js"
import { Vault } from "../vault/Vault.js"
import { FleetDbError } from "./errors.js"

/** The vault connection that holds the database's password (`roster connection add postgres`). */
export const DB_CONNECTION = "postgres"

/** Postgres's LISTEN, for the nodes' wake-ups: a channel's payloads as they are notified. */
export class FleetNotify extends Context.Tag("roster/FleetNotify")<FleetNotify, {
  readonly listen: (channel: string) => Stream.Stream<string, SqlError>
}>() {}

/** Where the database is, as people read it: host:port/database, never the password. */
export const whereOf = (cluster: ClusterSection) => {
  const url = new URL(cluster.database)
  return `${url.hostname}:${url.port || "5432"}${url.pathname === "/" ? "" : url.pathname}`
}

/** The password: the vault's `postgres` connection, else PGPASSWORD, else none (trust or peer auth). */
export const dbPassword = Effect.gen(function*() {
  const entry = yield* (yield* Vault).get(DB_CONNECTION)
  if (entry && typeof entry.key === "string" && entry.key !== "") return Option.some(Redacted.make(entry.key))
  // Config.option of a string fails only on a malformed value, which a string cannot be: unset is the only none.
  return yield* Config.option(Config.redacted("PGPASSWORD")).pipe(Effect.orElseSucceed(() => Option.none()))
})

/** What a connection failure means and what fixes it, from Postgres's error code or the socket's. */
const explain = (cause: unknown): { readonly detail: string; readonly fix: string } => {
  const c = (cause ?? {}) as { readonly code?: string; readonly message?: string }
  switch (c.code) {
    case "28P01":
    case "28000":
      return { detail: c.message ?? "authentication failed", fix: "store the role's password: roster connection add postgres (or set PGPASSWORD)" }
    case "3D000":
      return { detail: c.message ?? "no such database", fix: "create it (createdb), or name the right one in [cluster] database" }
    case "ECONNREFUSED":
      return { detail: "connection refused", fix: "start Postgres there, or fix the host and port in [cluster] database" }
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return { detail: "the host name does not resolve", fix: "fix the host in [cluster] database" }
    default:
      return { detail: c.message ?? "cannot connect", fix: "check that Postgres is up and reachable from this machine: [cluster] database" }
  }
}

/**
 * The fleet's database as an `SqlClient`. The Postgres client is loaded only here, on first use:
 * a machine without `[cluster]` never loads it. The URL is taken apart rather than handed to the
 * driver, which would let its (passwordless) parts override the password given beside it.
 */
export const fleetSqlLayer = (cluster: ClusterSection, options: { readonly maxConnections?: number } = {}) =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const password = yield* dbPassword
    const PgClient = yield* Effect.promise(() => import("@effect/sql-pg/PgClient"))
    const url = new URL(cluster.database)
    const sslmode = url.searchParams.get("sslmode")
    const ms = (s: number) => Math.round(s * 1000)
    // The pool is made here, not by PgClient.layer, for the session settings every connection
    // starts with: bounded lock waits and statements, and a frozen node's open transaction ended
    // by the database itself — the Postgres job queues' rules, so no node can hold another's dispatch.
    const client = PgClient.layerFromPool({
      acquire: Effect.acquireRelease(
        Effect.promise(() => import("pg")).pipe(
          Effect.map((pg) => new (pg.default ?? pg).Pool({
            host: decodeURIComponent(url.hostname.replace(/^\[|\]$/g, "")),
            port: url.port === "" ? 5432 : Number(url.port),
            database: decodeURIComponent(url.pathname.slice(1)) || "roster",
            user: decodeURIComponent(url.username) || "roster",
            ...(Option.isSome(password) ? { password: Redacted.value(password.value) } : {}),
            ...(sslmode === "require" || sslmode === "verify-full" ? { ssl: sslmode === "verify-full" ? true : { rejectUnauthorized: false } } : {}),
            application_name: "roster",
            connectionTimeoutMillis: 5000,
            idleTimeoutMillis: 60_000,
            max: options.maxConnections ?? 4,
            lock_timeout: ms(cluster.lock_timeout_s),
            statement_timeout: ms(cluster.statement_timeout_s),
            idle_in_transaction_session_timeout: ms(cluster.idle_transaction_timeout_s)
          })),
          Effect.tap((pool) => Effect.sync(() => pool.on("error", () => undefined))),
          Effect.tap((pool) =>
            Effect.tryPromise({ try: () => pool.query("SELECT 1"), catch: (cause) => new SqlErrorClass({ cause, message: "PgClient: Failed to connect" }) }).pipe(
              Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => new SqlErrorClass({ cause: new Error("Connection timed out"), message: "PgClient: Connection timed out" }) }),
              Effect.tapError(() => Effect.promise(() => pool.end().catch(() => undefined)))
            ))
        ),
        (pool) => Effect.promise(() => pool.end().catch(() => undefined)).pipe(Effect.timeoutOption(1000))
      ),
      applicationName: "roster"
    }).pipe(Layer.mapError((e) => new FleetDbError({ where: whereOf(cluster), ...explain(e.cause) })))
    const notify = Layer.effect(FleetNotify, Effect.map(PgClient.PgClient, (pg) => ({ listen: (channel: string) => pg.listen(channel) })))
    return Layer.provideMerge(notify, client)
  })) as Layer.Layer<SqlClient | FleetNotify, FleetDbError, Vault>
