import { isFinal, type TaskRecord, TaskStatus } from "../task/TaskRecord.js"
import { cut, html } from "./html.js"
import { nodeColumn } from "./nodeColumn.js"

export interface TaskFilter {
  readonly worker: string
  readonly status: string
}

/** Tasks: a filter, a form to add one, and the list with a cancel button on each that can still be cancelled. */
export const tasksBody = (tasks: ReadonlyArray<TaskRecord> | null, workers: ReadonlyArray<string>, filter: TaskFilter, csrf: string, note: string | null) => {
  const node = nodeColumn(tasks ?? [])
  return html`${note ? html`<p class="note" role="status">${note}</p>` : ""}
<form method="post" action="/tasks" class="add">
<h2>Add a task</h2>
<input type="hidden" name="csrf" value="${csrf}">
<label for="add-worker">Worker</label>
<select id="add-worker" name="worker" required>${workers.map((w) => html`<option value="${w}">${w}</option>`)}</select>
<label for="add-prompt">Prompt</label>
<textarea id="add-prompt" name="prompt" rows="3" required></textarea>
<label for="add-ceiling">Ceiling (minutes, optional)</label>
<input id="add-ceiling" name="ceiling" type="number" min="0.1" step="0.1">
<button type="submit">Queue it</button>
</form>
<form method="get" action="/tasks" class="filter">
<h2>Tasks</h2>
<label for="f-worker">Worker</label>
<select id="f-worker" name="worker"><option value="">any</option>${workers.map((w) => html`<option value="${w}"${filter.worker === w ? html` selected` : ""}>${w}</option>`)}</select>
<label for="f-status">Status</label>
<select id="f-status" name="status"><option value="">any</option>${TaskStatus.literals.map((s) => html`<option value="${s}"${filter.status === s ? html` selected` : ""}>${s}</option>`)}</select>
<button type="submit">Filter</button>
</form>
${tasks === null ? html`<p class="warn">The roster server is not running: start it (<code>roster server start</code>) to see and queue tasks.</p>` : tasks.length === 0 ? html`<p>No task matches.</p>` : html`<table>
<thead><tr><th scope="col">Task</th><th scope="col">Worker</th><th scope="col">Status</th>${node.head}<th scope="col">Prompt</th><th scope="col">Runs</th><th scope="col">Reason</th><th scope="col"><span class="sr">Action</span></th></tr></thead>
<tbody>${tasks.map((t) => html`<tr><td>${t.task_id}</td><td>${t.worker}</td><td>${t.status}${t.status === "queued" && t.not_before ? html` (waits until ${t.not_before})` : ""}${(t.attempts?.length ?? 0) > 0 ? html`<br><small>${t.attempts?.length} attempt${t.attempts?.length === 1 ? "" : "s"}${t.interrupted ? html`, interrupted by ${t.interrupted.by}` : ""}</small>` : ""}</td>${node.cell(t)}<td>${cut(t.prompt, 200)}</td><td>${t.run_ids.map((r) => html`<a href="/runs/${r}">${r}</a> `)}</td><td>${t.reason ? cut(t.reason, 300) : ""}</td><td>${
    isFinal(t.status) ? "" : html`<form method="post" action="/tasks/${t.task_id}/cancel"><input type="hidden" name="csrf" value="${csrf}"><button type="submit">Cancel ${t.task_id}</button></form>`
  }</td></tr>`)}</tbody>
</table>`}`
}
