import * as Migrator from "@effect/sql/Migrator"
import { CLAIM_NEXT, WRITE_TASK } from "./taskFunctions.js"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { FleetSchemaError } from "./errors.js"

/** Where roster records which of its migrations ran (its own table: the database may hold others'). */
const TABLE = "roster_migrations"

/**
 * roster's fleet tables, one migration per change, never edited once released: a node applies
 * what its database lacks under the migrator's table lock, so two nodes starting at once apply
 * each once.
 */
const MIGRATIONS = {
  /** The fleet's identity (its shared folder holds the same id) and the nodes with their heartbeats. */
  "1_nodes": Effect.flatMap(SqlClient, (sql) =>
    Effect.all([
      sql`CREATE TABLE roster_fleet (
        id text PRIMARY KEY,
        created_at timestamptz NOT NULL DEFAULT now(),
        one boolean NOT NULL DEFAULT true UNIQUE CHECK (one)
      )`,
      sql`CREATE TABLE roster_nodes (
        name text PRIMARY KEY,
        instance text NOT NULL,
        host text NOT NULL,
        pid integer NOT NULL,
        version text NOT NULL,
        advertise text,
        started_at timestamptz NOT NULL,
        heartbeat_at timestamptz NOT NULL,
        node_clock timestamptz NOT NULL,
        boxes integer NOT NULL DEFAULT 0,
        concurrency integer NOT NULL,
        load real NOT NULL DEFAULT 0,
        config jsonb NOT NULL,
        left_at timestamptz
      )`
    ], { discard: true })),
  /**
   * The fleet's queue: one row a task, its record as JSON beside the columns claims use. One
   * running attempt per worker across the fleet is the unique index, not a check in code: two
   * nodes claiming two tasks of one worker at once cannot both succeed.
   */
  "2_tasks": Effect.flatMap(SqlClient, (sql) =>
    Effect.all([
      sql`CREATE SEQUENCE roster_task_seq`,
      sql`CREATE TABLE roster_tasks (
        task_id text PRIMARY KEY,
        worker text NOT NULL,
        seq bigint NOT NULL,
        status text NOT NULL,
        node text,
        attempt integer NOT NULL DEFAULT 0,
        record jsonb NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now()
      )`,
      sql`CREATE UNIQUE INDEX roster_tasks_one_running ON roster_tasks (worker) WHERE status = 'running'`,
      sql`CREATE INDEX roster_tasks_by_status ON roster_tasks (status, seq)`
    ], { discard: true })),
  /**
   * Fencing: a node silent past the timeout is marked fenced (this instance of it), after which
   * nothing its runs do can land, and its running tasks go back to the queue or fail.
   */
  "3_fences": Effect.flatMap(SqlClient, (sql) =>
    Effect.all([
      sql`ALTER TABLE roster_nodes ADD COLUMN fenced_at timestamptz`,
      sql`ALTER TABLE roster_nodes ADD COLUMN fenced_by text`,
      sql`CREATE INDEX roster_tasks_by_node ON roster_tasks (node) WHERE status = 'running'`,
      // Each change of a row bumps it: a node re-reads only the tasks that changed since it last looked.
      sql`ALTER TABLE roster_tasks ADD COLUMN version bigint NOT NULL DEFAULT 0`
    ], { discard: true })),
  /**
   * The fleet's spend ledger: one row an answer, whichever node metered it, so a budget holds
   * across nodes. Each entry's id is its node's, so a write retried after a lost answer lands once.
   */
  "4_spend": Effect.flatMap(SqlClient, (sql) =>
    Effect.all([
      sql`CREATE TABLE roster_spend (
        id text PRIMARY KEY,
        time timestamptz NOT NULL,
        day text NOT NULL,
        run_id text NOT NULL,
        worker text NOT NULL,
        model text NOT NULL,
        input bigint NOT NULL,
        output bigint NOT NULL,
        cache_read bigint NOT NULL,
        cache_write bigint NOT NULL,
        usd double precision NOT NULL,
        priced boolean NOT NULL,
        node text NOT NULL
      )`,
      sql`CREATE INDEX roster_spend_by_day ON roster_spend (day, worker)`,
      sql`CREATE INDEX roster_spend_by_run ON roster_spend (run_id)`
    ], { discard: true })),
  /** Worker memory: each worker's log of events, in the order written (appends to a shared folder are not atomic across machines). */
  "5_memory": Effect.flatMap(SqlClient, (sql) =>
    Effect.all([
      sql`CREATE TABLE roster_memory (
        seq bigserial PRIMARY KEY,
        worker text NOT NULL,
        event jsonb NOT NULL,
        written_at timestamptz NOT NULL DEFAULT now()
      )`,
      sql`CREATE INDEX roster_memory_by_worker ON roster_memory (worker, seq)`
    ], { discard: true })),
  /**
   * The run index: one row a run, written by whichever node runs it, so listing runs reads a page
   * of rows rather than every run folder of the shared folder. Run ids begin with their start
   * time: newest first is their byte order.
   */
  "6_runs": Effect.flatMap(SqlClient, (sql) =>
    Effect.all([
      sql`CREATE TABLE roster_runs (
        run_id text COLLATE "C" PRIMARY KEY,
        worker text NOT NULL,
        kind text NOT NULL,
        task_id text,
        node text,
        started_at timestamptz NOT NULL,
        finished_at timestamptz,
        ended_by text
      )`,
      sql`CREATE INDEX roster_runs_by_worker ON roster_runs (worker, run_id)`
    ], { discard: true })),
  /**
   * The audit index: where each run's requests begin in each day's file of its node's audit log
   * (the log is in the shared folder; the index spares `runs show` reading it from the start).
   */
  "7_audit": Effect.flatMap(SqlClient, (sql) =>
    sql`CREATE TABLE roster_audit (
      run_id text NOT NULL,
      day text NOT NULL,
      node text NOT NULL,
      first_offset bigint NOT NULL,
      requests integer NOT NULL,
      PRIMARY KEY (run_id, day)
    )`),
  /**
   * Taints and untaints of runs: the gateway of the run's node and a person on any node each add
   * rows, every node reads them (one events file over NFS with two machines appending can lose
   * lines). In the order they were put.
   */
  "8_taints": Effect.flatMap(SqlClient, (sql) =>
    Effect.all([
      sql`CREATE TABLE roster_taints (
        seq bigserial PRIMARY KEY,
        run_id text COLLATE "C" NOT NULL,
        node text NOT NULL,
        event jsonb NOT NULL,
        put_at timestamptz NOT NULL DEFAULT now()
      )`,
      sql`CREATE INDEX roster_taints_by_run ON roster_taints (run_id, seq)`
    ], { discard: true })),
  /**
   * Requests a node's gateway holds for a person's decision (`[gateway] approvals = "ask"`): the
   * connection waits on that node, a person on any node decides, the holding node takes it.
   */
  "9_approvals": Effect.flatMap(SqlClient, (sql) =>
    sql`CREATE TABLE roster_approvals (
      id text PRIMARY KEY,
      node text NOT NULL,
      held jsonb NOT NULL,
      expires_at timestamptz NOT NULL,
      decision text,
      decided_by text,
      decided_at timestamptz
    )`),
  /**
   * The key the nodes sign their runner RPC calls with: made once by the first node that needs it,
   * read by every node from here (a box reaches neither the database nor its password).
   */
  "10_rpc_key": Effect.flatMap(SqlClient, (sql) =>
    sql`CREATE TABLE roster_rpc_key (
      one boolean PRIMARY KEY DEFAULT true CHECK (one),
      key text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`),
  /**
   * The claim as the Postgres job queues make it: one statement over an index of the runnable
   * tasks (queued, by seq), what a task waits for in a column of its own, and a worker's tasks
   * found by an index rather than a read of the table.
   */
  "11_claims": Effect.flatMap(SqlClient, (sql) =>
    Effect.all([
      sql`ALTER TABLE roster_tasks ADD COLUMN after_id text`,
      sql`UPDATE roster_tasks SET after_id = record->>'after' WHERE record->>'after' IS NOT NULL`,
      sql`CREATE INDEX roster_tasks_runnable ON roster_tasks (seq) WHERE status = 'queued'`,
      sql`CREATE INDEX roster_tasks_by_worker ON roster_tasks (worker, seq)`,
      sql`CREATE INDEX roster_tasks_by_after ON roster_tasks (after_id) WHERE status = 'queued' AND after_id IS NOT NULL`,
      // One unfinished task per idempotency key, fleet-wide: a second add finds the first.
      sql`CREATE UNIQUE INDEX roster_tasks_key ON roster_tasks ((record->>'key'))
        WHERE record->>'key' IS NOT NULL AND status IN ('queued', 'held', 'running')`,
      sql`CREATE INDEX roster_tasks_undelivered ON roster_tasks (seq)
        WHERE status IN ('done', 'failed', 'cancelled') AND record->>'reply_to' IS NOT NULL AND record->>'reply_to' <> 'none' AND NOT (record ? 'delivery')`
    ], { discard: true })),
  /**
   * One box per worker fleet-wide for the boxes that are not a task's (a chat session's): a row a
   * live box, its worker the key, taken before the box starts. A row whose node instance was
   * fenced, left or replaced is stale and taken over; a task's box is its running row.
   */
  "12_boxes": Effect.flatMap(SqlClient, (sql) =>
    sql`CREATE TABLE roster_boxes (
      worker text PRIMARY KEY,
      node text NOT NULL,
      instance text NOT NULL,
      run_key text NOT NULL,
      since timestamptz NOT NULL DEFAULT now()
    )`),
  /**
   * Finished tasks past [supervisor] keep_days, out of the live table (the claim's and the
   * views' reads stay short): read by task show and task list --all.
   */
  "13_archive": Effect.flatMap(SqlClient, (sql) =>
    sql`CREATE TABLE roster_tasks_archive (
      task_id text PRIMARY KEY,
      worker text NOT NULL,
      seq bigint NOT NULL,
      status text NOT NULL,
      record jsonb NOT NULL,
      archived_at timestamptz NOT NULL DEFAULT now()
    )`),
  /** The chat channel an answer was charged to (`[[chat.channel]] budget_usd_day`), summed by day. */
  "14_spend_channel": Effect.flatMap(SqlClient, (sql) =>
    Effect.all([
      sql`ALTER TABLE roster_spend ADD COLUMN chat_channel text`,
      sql`CREATE INDEX roster_spend_by_channel ON roster_spend (day, chat_channel) WHERE chat_channel IS NOT NULL`
    ], { discard: true })),
  /** The claim and a task's write as functions of the database: planned once a connection, not at every call (see taskFunctions.ts). */
  "15_task_functions": Effect.flatMap(SqlClient, (sql) =>
    Effect.all([sql.unsafe(CLAIM_NEXT), sql.unsafe(WRITE_TASK)], { discard: true })),
  /**
   * A key is its worker's own: one unfinished task per worker and key (the fleet-wide index made one
   * worker's key answer another's add with the other's task, and told a box that a key was in use).
   */
  "16_worker_keys": Effect.flatMap(SqlClient, (sql) =>
    Effect.all([
      sql`DROP INDEX roster_tasks_key`,
      sql`CREATE UNIQUE INDEX roster_tasks_key ON roster_tasks (worker, (record->>'key'))
        WHERE record->>'key' IS NOT NULL AND status IN ('queued', 'held', 'running')`
    ], { discard: true }))
}

/** The newest schema this roster knows. */
export const SCHEMA_VERSION = Object.keys(MIGRATIONS).map((k) => Number(k.split("_")[0])).reduce((a, b) => Math.max(a, b), 0)

/** The database's schema version: the newest migration applied (0 before the first). */
export const schemaVersion = Effect.gen(function*() {
  const sql = yield* SqlClient
  const exists = yield* sql<{ readonly t: string | null }>`SELECT to_regclass(${TABLE})::text AS t`
  if (!exists[0]?.t) return 0
  const rows = yield* sql<{ readonly v: number | null }>`SELECT max(migration_id) AS v FROM roster_migrations`.withoutTransform
  return rows[0]?.v ?? 0
})

/** Brings the database to this roster's schema; refuses one newer than it knows (another node runs a newer roster). */
export const migrate = Effect.gen(function*() {
  const sql = yield* SqlClient
  // One node at a time, from the version check on: the migrator's own table lock comes after it
  // creates its table, which two nodes starting at once on an empty database would both try.
  return yield* sql.withTransaction(Effect.gen(function*() {
    yield* sql`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK}::bigint)`
    const found = yield* schemaVersion
    if (found > SCHEMA_VERSION) return yield* new FleetSchemaError({ found, known: SCHEMA_VERSION })
    // The migrator's own table, as it would make it: its probe for the table fails inside a
    // transaction (aborting it) when the table is missing.
    yield* sql`CREATE TABLE IF NOT EXISTS roster_migrations (
      migration_id integer PRIMARY KEY,
      created_at timestamp with time zone NOT NULL DEFAULT now(),
      name text NOT NULL
    )`
    const applied = yield* Migrator.make({})({ loader: Migrator.fromRecord(MIGRATIONS), table: TABLE })
    return { from: found, to: SCHEMA_VERSION, applied: applied.map(([id, name]) => `${id}_${name}`) }
  }))
})

/** The advisory lock roster's migrations run under (any number, the same on every node). */
const MIGRATION_LOCK = 0x726f73746572
