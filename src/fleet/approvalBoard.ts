import { SqlClient } from "@effect/sql/SqlClient"
import { Effect, Layer, Option, Schema } from "effect"
import { ApprovalDecision, PendingApproval } from "../contract/approval.js"
import { ApprovalBoard, BoardSilent } from "../contract/ApprovalBoard.js"
import type { SqlError } from "@effect/sql/SqlError"
import { sqlDetail } from "./sqlDetail.js"
import { never, type Nudge } from "./rpc/nudge.js"

const decodeHeld = Schema.decodeUnknownOption(Schema.parseJson(PendingApproval))
const decodeDecision = Schema.decodeUnknownOption(ApprovalDecision)

const silent = (e: SqlError) => new BoardSilent({ detail: sqlDetail(e) })

/** The rows a query gave that read as held requests (a row of a newer roster's shape is left out). */
const heldOf = (rows: ReadonlyArray<{ readonly held: string }>) => rows.flatMap((r) => Option.toArray(decodeHeld(r.held)))

/**
 * The fleet's board of held requests over a database client (`roster_approvals`): a node posts
 * what its gateway holds, any node decides one still waiting (once: the first decision stands),
 * and the holding node takes the decision and the row down.
 */
export const approvalBoardOver = (sql: SqlClient, node: string, nudges: Nudge = never) =>
  ApprovalBoard.of({
    node,
    nextNudge: nudges.next,
    post: (held) =>
      // What a node that died while holding left behind goes as the next request is posted.
      sql`DELETE FROM roster_approvals WHERE expires_at < now() - interval '1 hour'`.pipe(
        Effect.zipRight(sql`INSERT INTO roster_approvals (id, node, held, expires_at)
          VALUES (${held.id}, ${node}, ${JSON.stringify(held)}::jsonb, ${new Date(held.expires_at)})`),
        Effect.asVoid,
        Effect.mapError(silent)
      ),
    decisionOf: (id) =>
      sql<{ readonly decision: string | null; readonly decided_by: string | null }>`
        SELECT decision, decided_by FROM roster_approvals WHERE id = ${id} AND node = ${node}`.withoutTransform.pipe(
        Effect.map((rows) => {
          const row = rows[0]
          const decision = row?.decision == null ? Option.none() : decodeDecision(row.decision)
          return Option.map(decision, (d) => ({ decision: d, by: row?.decided_by ?? "a person on another node" }))
        }),
        Effect.mapError(silent)
      ),
    remove: (id) => sql`DELETE FROM roster_approvals WHERE id = ${id} AND node = ${node}`.pipe(Effect.asVoid, Effect.mapError(silent)),
    waiting: sql<{ readonly held: string }>`
      SELECT held::text AS held FROM roster_approvals WHERE decision IS NULL AND expires_at > now() ORDER BY expires_at`.withoutTransform.pipe(
      Effect.map(heldOf),
      Effect.mapError(silent)
    ),
    decide: (id, decided) =>
      sql<{ readonly held: string }>`
        UPDATE roster_approvals SET decision = ${decided.decision}, decided_by = ${decided.by}, decided_at = now()
        WHERE id = ${id} AND decision IS NULL AND expires_at > now() RETURNING held::text AS held`.withoutTransform.pipe(
        Effect.map((rows) => Option.fromNullable(heldOf(rows)[0])),
        Effect.mapError(silent)
      )
  })

/** The fleet's board on the daemon's own connection, woken by the node's runner RPC. */
export const fleetApprovalBoard = (node: string, nudges: Nudge) =>
  Layer.effect(ApprovalBoard, Effect.map(SqlClient, (sql) => approvalBoardOver(sql, node, nudges)))
