import { LIVE_BOX_ROW } from "./boxRows.js"
import { TASKS_CHANNEL } from "./channels.js"

/*
 * The queue's two hot statements as functions of the database, as graphile-worker's `get_job` is:
 * a function's statements are planned once per connection and kept, where the same statement
 * sent as text is planned at every call — and planning the claim cost three times running it
 * (1.3 ms against 0.4, pg_stat_statements, 2,000 claims). Their plans are generic (planned for
 * any arguments): left to choose, the write planned again at every call for its `p_moved`. What they do is the store's
 * (src/fleet/taskStore.ts); a change to either is a new migration that replaces it.
 */

/**
 * The changed task's worker's view as its statement found it (before the change: a statement
 * does not see its own writes), built as `viewEntry` (src/task/view.ts) builds it. `t` is the row.
 */
const VIEW_BEFORE = `(SELECT coalesce(json_agg(json_build_object('task_id', v.task_id, 'status', v.status,
    'prompt', v.record->'prompt', 'after', v.record->'after', 'ceiling_min', v.record->'ceiling_min',
    'origin', v.record->'origin'->'by', 'created_at', v.record->'created_at', 'run_id', v.record->'run_ids'->-1) ORDER BY v.seq), '[]'::json)
  FROM roster_tasks v WHERE v.worker = t.worker AND v.status NOT IN ('done', 'failed', 'cancelled'))`

/**
 * The next runnable task, claimed: the first queued task by seq whose worker runs nothing anywhere
 * in the fleet (no running task, no live box row) nor here (`p_busy`), whose run-at time has come,
 * whose `after` is done and whose continuation has its run to resume — SKIP LOCKED, so a row
 * another node holds is stepped over, never waited for; none while this instance is fenced.
 * Stamped running with this node, the next attempt and the run id, announced on the tasks
 * channel; its record, version and its worker's view come back.
 */
export const CLAIM_NEXT = `CREATE OR REPLACE FUNCTION roster_claim_next(p_node text, p_busy text[], p_run_id text, p_instance text, p_time text)
RETURNS TABLE (o_record jsonb, o_version text, o_view json) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
  got record;
BEGIN
  UPDATE roster_tasks t SET status = 'running', node = p_node, attempt = t.attempt + 1, updated_at = now(), version = t.version + 1,
    record = t.record || jsonb_build_object(
      'status', 'running', 'reason', NULL::text, 'started_at', p_time, 'updated_at', p_time,
      'run_ids', coalesce(t.record->'run_ids', '[]'::jsonb) || to_jsonb(p_run_id), 'node', p_node, 'attempt', t.attempt + 1)
  WHERE t.task_id = (
    SELECT q.task_id FROM roster_tasks q
    WHERE q.status = 'queued'
      AND (q.record->>'not_before' IS NULL OR (q.record->>'not_before')::timestamptz <= p_time::timestamptz)
      AND NOT (q.worker = ANY(p_busy))
      AND NOT EXISTS (SELECT 1 FROM roster_tasks r WHERE r.worker = q.worker AND r.status = 'running')
      AND NOT EXISTS (SELECT 1 FROM roster_boxes b WHERE b.worker = q.worker AND ${LIVE_BOX_ROW})
      AND (q.after_id IS NULL OR EXISTS (SELECT 1 FROM roster_tasks a WHERE a.task_id = q.after_id AND a.status = 'done'))
      AND (q.record->'continues' IS NULL OR q.record->'continues' = 'null'::jsonb
        OR (q.record->'continues'->>'task_id' = q.task_id)
        OR EXISTS (SELECT 1 FROM roster_tasks c WHERE c.task_id = q.record->'continues'->>'task_id' AND c.status IN ('done', 'failed', 'cancelled'))
        OR (q.record->'continues'->>'task_id' IS NULL AND EXISTS (
          SELECT 1 FROM roster_runs u WHERE u.run_id = q.record->'continues'->>'run_id' AND u.finished_at IS NOT NULL)))
      AND NOT EXISTS (SELECT 1 FROM roster_nodes f WHERE f.name = p_node AND f.instance = p_instance AND f.fenced_at IS NOT NULL)
    ORDER BY q.seq
    FOR UPDATE SKIP LOCKED
    LIMIT 1)
  RETURNING t.task_id AS id, t.record AS rec, t.version::text AS ver, ${VIEW_BEFORE} AS vw INTO got;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  PERFORM pg_notify('${TASKS_CHANNEL}', got.id);
  o_record := got.rec;
  o_version := got.ver;
  o_view := got.vw;
  RETURN NEXT;
END
$fn$`

/**
 * A task's row written only if it is still at `p_version` (no one wrote it since) and, when
 * `p_fence_instance` is given (a claim), while that instance of `p_self` is not fenced; a change
 * of status (`p_moved`) is announced and gives back its worker's view. Nothing back when not written.
 */
export const WRITE_TASK = `CREATE OR REPLACE FUNCTION roster_write_task(p_task_id text, p_version bigint, p_status text, p_record jsonb,
  p_node text, p_attempt integer, p_self text, p_fence_instance text, p_moved boolean)
RETURNS TABLE (o_version text, o_view json) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
  got record;
BEGIN
  UPDATE roster_tasks t SET status = p_status, record = p_record, node = p_node, attempt = p_attempt, updated_at = now(), version = t.version + 1
  WHERE t.task_id = p_task_id AND t.version = p_version
    AND (p_fence_instance IS NULL OR NOT EXISTS (
      SELECT 1 FROM roster_nodes f WHERE f.name = p_self AND f.instance = p_fence_instance AND f.fenced_at IS NOT NULL))
  RETURNING t.version::text AS ver, CASE WHEN p_moved THEN ${VIEW_BEFORE} END AS vw INTO got;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  IF p_moved THEN
    PERFORM pg_notify('${TASKS_CHANNEL}', p_task_id);
  END IF;
  o_version := got.ver;
  o_view := got.vw;
  RETURN NEXT;
END
$fn$`
