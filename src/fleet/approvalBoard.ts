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
 * A request whose node stopped or was declared lost has no connection waiting any more: it is
 * neither listed nor decided (a decision would "succeed" with nobody to take it).
 */
const heldByLiveNode = (sql: SqlClient) =>
  sql`NOT EXISTS (SELECT 1 FROM roster_nodes n WHERE n.name = a.node AND (n.left_at IS NOT NULL OR n.fenced_at IS NOT NULL))`

/** What an earlier daemon of this node left on the board: a fresh daemon holds nothing yet. */
export const clearHeldOf = (sql: SqlClient, node: string) =>
  sql`DELETE FROM roster_approvals WHERE node = ${node}`.pipe(Effect.asVoid)

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
      sql<{ readonly decision: string | null; readonly decided_by: string | null; readonly decided_where: string | null }>`
        SELECT decision, decided_by, held->>'decided_where' AS decided_where FROM roster_approvals WHERE id = ${id} AND node = ${node}`.withoutTransform.pipe(
        Effect.map((rows) => {
          const row = rows[0]
          const decision = row?.decision == null ? Option.none() : decodeDecision(row.decision)
          const where = row?.decided_where ?? undefined
          return Option.map(decision, (d) => ({ decision: d, by: row?.decided_by ?? "a person on another node", ...(where ? { where } : {}) }))
        }),
        Effect.mapError(silent)
      ),
    remove: (id) => sql`DELETE FROM roster_approvals WHERE id = ${id} AND node = ${node}`.pipe(Effect.asVoid, Effect.mapError(silent)),
    waiting: sql<{ readonly held: string }>`
      SELECT held::text AS held FROM roster_approvals a WHERE decision IS NULL AND expires_at > now() AND ${heldByLiveNode(sql)}
      ORDER BY expires_at`.withoutTransform.pipe(
      Effect.map(heldOf),
      Effect.mapError(silent)
    ),
    placeCard: (id, card) =>
      sql`UPDATE roster_approvals SET held = jsonb_set(held, '{card}', ${JSON.stringify(card)}::jsonb) WHERE id = ${id} AND node = ${node}`.pipe(
        Effect.asVoid,
        Effect.mapError(silent)
      ),
    decide: (id, decided, card) =>
      sql<{ readonly held: string }>`
        UPDATE roster_approvals a SET decision = ${decided.decision}, decided_by = ${decided.by}, decided_at = now(),
          held = ${decided.where === undefined ? sql`held` : sql`jsonb_set(held, '{decided_where}', to_jsonb(${decided.where}::text))`}
        WHERE id = ${id} AND decision IS NULL AND expires_at > now() AND ${heldByLiveNode(sql)}
          AND ${card === undefined ? sql`TRUE` : sql`held->'card' = ${JSON.stringify(card)}::jsonb`}
        RETURNING held::text AS held`.withoutTransform.pipe(
        Effect.map((rows) => Option.fromNullable(heldOf(rows)[0])),
        Effect.mapError(silent)
      )
  })

/**
 * The fleet's board on the daemon's own connection, woken by the node's runner RPC; what a killed
 * daemon of this node left there taken down first (a failure is said: those rows lapse by themselves).
 */
export const fleetApprovalBoard = (node: string, nudges: Nudge) =>
  Layer.effect(
    ApprovalBoard,
    Effect.gen(function*() {
      const sql = yield* SqlClient
      yield* clearHeldOf(sql, node).pipe(
        Effect.catchAll((e) => Effect.logWarning(`gateway: held requests an earlier daemon of node ${node} left on the fleet's board stay listed until their wait runs out (${sqlDetail(e)})`))
      )
      return approvalBoardOver(sql, node, nudges)
    })
  )
